#include "train/training_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <ctime>

#include "core/json_text.hpp"

namespace mgt {

namespace {

std::string printf_string(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string printf_string(const char* format, ...) {
  char buf[256];
  va_list args;
  va_start(args, format);
  int n = std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  if (n < 0) return {};
  if (static_cast<std::size_t>(n) < sizeof buf) return std::string(buf, static_cast<std::size_t>(n));
  std::string out(static_cast<std::size_t>(n), '\0');
  va_start(args, format);
  std::vsnprintf(out.data(), out.size() + 1, format, args);
  va_end(args);
  return out;
}

// Python's format() of a float with a printf-style conversion: as C, except that NaN never
// shows a sign.
std::string python_format(double value, const char* format, bool upper) {
  if (std::isnan(value)) return upper ? "NAN" : "nan";
  return printf_string(format, value);
}

std::string e6(double v) { return python_format(v, "%.6E", true); }
std::string f1(double v) { return python_format(v, "%.1f", false); }
std::string f3(double v) { return python_format(v, "%.3f", false); }

// Megatron prints the throughput with one decimal, which shows a CPU's few GFLOP/s as 0.0;
// below 1 the value keeps two significant digits instead (0.0034), so it stays readable while
// Megatron's pattern (digits, a point, digits) still matches.
std::string throughput_text(double v) {
  if (!(v > 0.0) || v >= 1.0 || !std::isfinite(v)) return f1(v);
  const int decimals = 1 - static_cast<int>(std::floor(std::log10(v)));
  std::string text = printf_string("%.*f", decimals, v);
  // Rounding up may carry into a new digit (0.0995 -> 0.100): keep two significant digits.
  if (text.size() > 1 && text.back() == '0' && decimals > 1 && std::stod(text) >= std::pow(10.0, 2 - decimals))
    text.pop_back();
  return text;
}

long long ll(std::int64_t v) { return static_cast<long long>(v); }

std::string json_number(double v) { return std::isfinite(v) ? python_float_repr(v) : "null"; }

std::string metric_key(const std::string& name) {
  std::string key = name;
  for (char& c : key)
    if (c == ' ') c = '_';
  return key;
}

class JsonObject {
public:
  void add(const std::string& key, const std::string& raw_value) {
    text_ += (text_.empty() ? "{" : ", ") + json_quote(key) + ": " + raw_value;
  }
  void add(const std::string& key, std::int64_t v) { add(key, std::to_string(v)); }
  void add(const std::string& key, double v) { add(key, json_number(v)); }
  std::string str() const { return text_ + "}"; }

private:
  std::string text_;
};

// {"all_gather beside": {"ms": …, "exposed_ms": …, "count": …}, …}, nothing when empty.
void add_comm_parts(JsonObject& j, const char* key, const std::vector<IterationLog::CommPart>& parts) {
  if (parts.empty()) return;
  JsonObject by_operation;
  for (const IterationLog::CommPart& p : parts) {
    JsonObject part;
    part.add("ms", p.ms);
    part.add("exposed_ms", p.exposed_ms);
    part.add("count", p.count);
    by_operation.add(p.operation + (p.beside ? " beside" : " on stream"), part.str());
  }
  j.add(key, by_operation.str());
}

}  // namespace

void LossAccumulator::add(const LossValues& losses, bool skipped) {
  if (skipped) {
    ++skipped_;
    bool got_nan = false;
    for (const auto& [name, value] : losses) got_nan = got_nan || !std::isfinite(value);
    nan_ += got_nan ? 1 : 0;
    return;
  }
  ++advanced_;
  for (const auto& loss : losses) {
    auto it = std::find_if(sums_.begin(), sums_.end(), [&](const auto& s) { return s.first == loss.first; });
    if (it == sums_.end()) it = sums_.insert(sums_.end(), {loss.first, 0.0f});
    it->second += static_cast<float>(loss.second);
  }
}

LossValues LossAccumulator::averages() const {
  LossValues out;
  const double divisor = static_cast<double>(std::max<std::int64_t>(1, advanced_));
  for (const auto& [name, sum] : sums_) out.emplace_back(name, static_cast<double>(sum) / divisor);
  return out;
}

void LossAccumulator::reset() {
  // Megatron keeps the keys and zeroes them, so the order of names survives a reset.
  for (auto& s : sums_) s.second = 0.0f;
  advanced_ = skipped_ = nan_ = 0;
}

double throughput_tflops_per_gpu(double flops_per_iteration, double seconds_per_iteration, std::int64_t world_size) {
  return flops_per_iteration / (seconds_per_iteration * 1e12 * static_cast<double>(world_size));
}

std::string log_timestamp(std::chrono::system_clock::time_point when) {
  using namespace std::chrono;
  const auto since_epoch = when.time_since_epoch();
  const auto secs = duration_cast<seconds>(since_epoch);
  auto micros = duration_cast<microseconds>(since_epoch - secs).count();
  std::time_t t = static_cast<std::time_t>(secs.count());
  if (micros < 0) {  // before 1970: floor, not truncation
    micros += 1000000;
    --t;
  }
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return std::string(buf) + printf_string(".%06lld", static_cast<long long>(micros));
}

std::string format_iteration_line(const IterationLog& g, const std::string& timestamp) {
  std::string s = " [" + timestamp + "]";
  s += printf_string(" iteration %8lld/%8lld |", ll(g.iteration), ll(g.train_iters));
  s += printf_string(" consumed samples: %12lld |", ll(g.consumed_samples));
  if (g.skipped_samples > 0) s += printf_string(" skipped samples: %12lld |", ll(g.skipped_samples));
  s += " elapsed time per iteration (ms): " + f1(g.seconds_per_iteration * 1000.0) + " |";
  if (g.tflops_per_gpu) s += " throughput per GPU (TFLOP/s/GPU): " + throughput_text(*g.tflops_per_gpu) + " |";
  if (g.learning_rate) s += " learning rate: " + e6(*g.learning_rate) + " |";
  if (g.learning_rate && g.decoupled_learning_rate)
    s += " decoupled learning rate: " + e6(*g.decoupled_learning_rate) + " |";
  s += printf_string(" global batch size: %5lld |", ll(g.global_batch_size));
  for (const auto& [name, avg] : g.losses)
    if (avg >= 0.0) s += " " + name + ": " + e6(avg) + " |";
  s += " loss scale: " + f1(g.loss_scale) + " |";
  if (g.grad_norm) s += " grad norm: " + f3(*g.grad_norm) + " |";
  if (g.num_zeros) s += " num zeros: " + (std::isnan(*g.num_zeros) ? std::string("nan") : python_float_repr(*g.num_zeros)) + " |";
  if (g.params_norm) s += " params norm: " + f3(*g.params_norm) + " |";
  s += printf_string(" number of skipped iterations: %3lld |", ll(g.skipped_iterations));
  s += printf_string(" number of nan iterations: %3lld |", ll(g.nan_iterations));
  return s;
}

std::string format_memory_report(std::int64_t rank, std::int64_t iteration, std::int64_t allocated,
                                 std::int64_t max_allocated, std::int64_t reserved, std::int64_t max_reserved) {
  const auto mib = [](std::int64_t bytes) { return python_float_repr(static_cast<double>(bytes) / (1024.0 * 1024.0)); };
  return "[Rank " + std::to_string(rank) + "] (after " + std::to_string(iteration) + " iterations) memory (MB) | allocated: " +
         mib(allocated) + " | max allocated: " + mib(max_allocated) + " | reserved: " + mib(reserved) +
         " | max reserved: " + mib(max_reserved);
}

std::string format_validation_block(const std::string& prefix, const LossValues& losses) {
  std::string s = " validation loss at " + prefix + " | ";
  for (const auto& [name, value] : losses) {
    // Python's min(20, value) keeps 20 when value is NaN.
    const double ppl = std::exp(value < 20.0 ? value : 20.0);
    s += name + " value: " + e6(value) + " | ";
    s += name + " PPL: " + e6(ppl) + " | ";
  }
  const std::string dashes(s.size() + 1, '-');
  return dashes + "\n" + s + "\n" + dashes + "\n";
}

std::string validation_prefix(std::int64_t iteration) { return "iteration " + std::to_string(iteration); }
std::string validation_set_prefix(std::int64_t iteration) { return validation_prefix(iteration) + " on validation set"; }
std::string test_set_prefix(std::int64_t iteration) { return validation_prefix(iteration) + " on test set"; }

std::string format_datetime_line(const std::string& what, const std::string& timestamp) {
  return "[" + what + "] datetime: " + timestamp + " ";
}

std::string format_padded_vocab_line(std::int64_t vocab_size, std::int64_t padded_vocab_size) {
  return printf_string(" > padded vocab (size: %lld) with %lld dummy tokens (new size: %lld)", ll(vocab_size),
                       ll(padded_vocab_size - vocab_size), ll(padded_vocab_size));
}

std::string format_building_tokenizer_line(const std::string& tokenizer_type) {
  return "> building " + tokenizer_type + " tokenizer ...";
}

std::string iteration_metrics_json(const IterationLog& g, const std::string& timestamp) {
  JsonObject j;
  j.add("event", json_quote("train"));
  j.add("iteration", g.iteration);
  j.add("train_iters", g.train_iters);
  j.add("consumed_samples", g.consumed_samples);
  j.add("skipped_samples", g.skipped_samples);
  j.add("elapsed_ms_per_iteration", g.seconds_per_iteration * 1000.0);
  const double tokens = static_cast<double>(g.global_batch_size) * static_cast<double>(g.seq_length);
  j.add("tokens_per_second", g.seconds_per_iteration > 0.0 ? tokens / g.seconds_per_iteration : std::nan(""));
  if (g.tflops_per_gpu) j.add("tflops_per_gpu", *g.tflops_per_gpu);
  if (g.learning_rate) j.add("learning_rate", *g.learning_rate);
  if (g.decoupled_learning_rate) j.add("decoupled_learning_rate", *g.decoupled_learning_rate);
  j.add("global_batch_size", g.global_batch_size);
  for (const auto& [name, avg] : g.losses) j.add(metric_key(name), avg);
  for (const auto& [name, value] : g.moe_layer_losses) j.add(name, value);
  j.add("loss_scale", g.loss_scale);
  if (g.grad_norm) j.add("grad_norm", *g.grad_norm);
  if (g.num_zeros) j.add("num_zeros", *g.num_zeros);
  if (g.params_norm) j.add("params_norm", *g.params_norm);
  j.add("skipped_iterations", g.skipped_iterations);
  j.add("nan_iterations", g.nan_iterations);
  if (g.data_parallel_comm_ms) j.add("data_parallel_comm_ms", *g.data_parallel_comm_ms);
  if (g.data_parallel_comm_exposed_ms) j.add("data_parallel_comm_exposed_ms", *g.data_parallel_comm_exposed_ms);
  if (g.tensor_parallel_comm_ms) j.add("tensor_parallel_comm_ms", *g.tensor_parallel_comm_ms);
  if (g.tensor_parallel_comm_exposed_ms) j.add("tensor_parallel_comm_exposed_ms", *g.tensor_parallel_comm_exposed_ms);
  if (g.pipeline_parallel_comm_ms) j.add("pipeline_parallel_comm_ms", *g.pipeline_parallel_comm_ms);
  if (g.pipeline_parallel_comm_exposed_ms)
    j.add("pipeline_parallel_comm_exposed_ms", *g.pipeline_parallel_comm_exposed_ms);
  if (g.context_parallel_comm_ms) j.add("context_parallel_comm_ms", *g.context_parallel_comm_ms);
  if (g.context_parallel_comm_exposed_ms)
    j.add("context_parallel_comm_exposed_ms", *g.context_parallel_comm_exposed_ms);
  if (g.expert_parallel_comm_ms) j.add("expert_parallel_comm_ms", *g.expert_parallel_comm_ms);
  if (g.expert_parallel_comm_exposed_ms) j.add("expert_parallel_comm_exposed_ms", *g.expert_parallel_comm_exposed_ms);
  if (g.forward_backward_ms) j.add("forward_backward_ms", *g.forward_backward_ms);
  if (g.grads_sync_ms) j.add("grads_sync_ms", *g.grads_sync_ms);
  if (g.optimizer_ms) j.add("optimizer_ms", *g.optimizer_ms);
  add_comm_parts(j, "data_parallel_comm_by_operation", g.data_parallel_comm_parts);
  add_comm_parts(j, "tensor_parallel_comm_by_operation", g.tensor_parallel_comm_parts);
  add_comm_parts(j, "pipeline_parallel_comm_by_operation", g.pipeline_parallel_comm_parts);
  add_comm_parts(j, "context_parallel_comm_by_operation", g.context_parallel_comm_parts);
  add_comm_parts(j, "expert_parallel_comm_by_operation", g.expert_parallel_comm_parts);
  j.add("timestamp", json_quote(timestamp));
  return j.str();
}

std::string validation_metrics_json(const std::string& event, std::int64_t iteration, const LossValues& losses,
                                    const std::string& timestamp) {
  JsonObject j;
  j.add("event", json_quote(event));
  j.add("iteration", iteration);
  for (const auto& [name, value] : losses) {
    j.add(metric_key(name), value);
    j.add(metric_key(name) + "_ppl", std::exp(value < 20.0 ? value : 20.0));
  }
  j.add("timestamp", json_quote(timestamp));
  return j.str();
}

}  // namespace mgt
