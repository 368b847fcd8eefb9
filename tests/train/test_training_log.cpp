#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <optional>
#include <string>

#include "train/flops.hpp"
#include "train/training_log.hpp"

using namespace mgt;

namespace {

constexpr const char* kStamp = "2024-05-01 12:34:56.123456";

IterationLog sample_log() {
  IterationLog g;
  g.iteration = 100;
  g.train_iters = 1000;
  g.consumed_samples = 800;
  g.seconds_per_iteration = 0.2501;
  g.learning_rate = 3e-4;
  g.global_batch_size = 8;
  g.losses = {{"lm loss", 2.345678912}};
  g.grad_norm = 1.23456;
  g.seq_length = 1024;
  return g;
}

// Sets TZ for one scope, so that local time is predictable.
class ScopedTimeZone {
public:
  explicit ScopedTimeZone(const char* tz) {
    if (const char* old = std::getenv("TZ")) old_ = old;
    setenv("TZ", tz, 1);
    tzset();
  }
  ~ScopedTimeZone() {
    if (old_) setenv("TZ", old_->c_str(), 1);
    else unsetenv("TZ");
    tzset();
  }

private:
  std::optional<std::string> old_;
};

}  // namespace

// Expected strings are written from Megatron's format strings in training.py training_log:
// ' iteration {:8d}/{:8d} |', ' consumed samples: {:12d} |', ' elapsed time per iteration
// (ms): {:.1f} |', ' learning rate: {:.6E} |', ' global batch size: {:5d} |', ' {}: {:.6E} |',
// ' loss scale: {:.1f} |', ' grad norm: {:.3f} |', ' number of skipped iterations: {:3d} |', ...
TEST_CASE("training log: the iteration line byte for byte", "[train]") {
  CHECK(format_iteration_line(sample_log(), kStamp) ==
        " [2024-05-01 12:34:56.123456] iteration      100/    1000 | consumed samples:          800 |"
        " elapsed time per iteration (ms): 250.1 | learning rate: 3.000000E-04 | global batch size:     8 |"
        " lm loss: 2.345679E+00 | loss scale: 1.0 | grad norm: 1.235 | number of skipped iterations:   0 |"
        " number of nan iterations:   0 |");
}

TEST_CASE("training log: optional fields of the iteration line", "[train]") {
  IterationLog g = sample_log();
  g.tflops_per_gpu = 12.345;
  g.num_zeros = 17.0;
  g.params_norm = 250.0;
  CHECK(format_iteration_line(g, kStamp) ==
        " [2024-05-01 12:34:56.123456] iteration      100/    1000 | consumed samples:          800 |"
        " elapsed time per iteration (ms): 250.1 | throughput per GPU (TFLOP/s/GPU): 12.3 |"
        " learning rate: 3.000000E-04 | global batch size:     8 | lm loss: 2.345679E+00 | loss scale: 1.0 |"
        " grad norm: 1.235 | num zeros: 17.0 | params norm: 250.000 | number of skipped iterations:   0 |"
        " number of nan iterations:   0 |");

  g = sample_log();
  g.skipped_samples = 16;
  g.learning_rate.reset();  // ranks without parameters print no learning rate
  g.grad_norm.reset();
  g.losses = {{"lm loss", std::nan("")}, {"other loss", -1.0}};  // neither is >= 0: not printed
  g.loss_scale = 65536.0;
  g.skipped_iterations = 2;
  g.nan_iterations = 1;
  g.iteration = 123456789;
  g.train_iters = 123456789;
  CHECK(format_iteration_line(g, kStamp) ==
        " [2024-05-01 12:34:56.123456] iteration 123456789/123456789 | consumed samples:          800 |"
        " skipped samples:           16 | elapsed time per iteration (ms): 250.1 | global batch size:     8 |"
        " loss scale: 65536.0 | number of skipped iterations:   2 | number of nan iterations:   1 |");
}

TEST_CASE("training log: --decoupled-lr's rate follows the learning rate", "[train]") {
  IterationLog g = sample_log();
  g.decoupled_learning_rate = 6e-3;
  CHECK(format_iteration_line(g, kStamp).find(" learning rate: 3.000000E-04 | decoupled learning rate: 6.000000E-03 |"
                                              " global batch size:") != std::string::npos);
  CHECK(iteration_metrics_json(g, kStamp).find("\"learning_rate\": 0.0003, \"decoupled_learning_rate\": 0.006, ") !=
        std::string::npos);
}

TEST_CASE("training log: a throughput below 1 TFLOP/s keeps two significant digits", "[train]") {
  const auto field = [](double tflops) {
    IterationLog g = sample_log();
    g.tflops_per_gpu = tflops;
    const std::string line = format_iteration_line(g, kStamp);
    const std::string key = "throughput per GPU (TFLOP/s/GPU): ";
    const std::size_t at = line.find(key) + key.size();
    return line.substr(at, line.find(' ', at) - at);
  };
  CHECK(field(12.345) == "12.3");  // Megatron's {:.1f}
  CHECK(field(1.25) == "1.2");
  CHECK(field(0.5) == "0.50");
  CHECK(field(0.0034567) == "0.0035");
  CHECK(field(0.000012) == "0.000012");
  CHECK(field(0.0999) == "0.10");
  CHECK(field(0.9999) == "1.0");
  CHECK(field(0.0) == "0.0");
}

TEST_CASE("training log: validation and test blocks", "[train]") {
  // ' validation loss at {prefix} | ' + '{key} value: {:.6E} | ' + '{key} PPL: {:.6E} | ',
  // framed by len(string) + 1 dashes.
  const std::string line = " validation loss at iteration 100 | lm loss value: 2.500000E+00 | lm loss PPL: 1.218249E+01 | ";
  const std::string dashes(95, '-');
  REQUIRE(line.size() + 1 == 95);
  CHECK(format_validation_block(validation_prefix(100), {{"lm loss", 2.5}}) == dashes + "\n" + line + "\n" + dashes + "\n");

  const std::string test_line =
      " validation loss at iteration 7 on test set | lm loss value: 2.500000E+00 | lm loss PPL: 1.218249E+01 | ";
  CHECK(format_validation_block(test_set_prefix(7), {{"lm loss", 2.5}}) ==
        std::string(test_line.size() + 1, '-') + "\n" + test_line + "\n" + std::string(test_line.size() + 1, '-') + "\n");
  CHECK(validation_set_prefix(7) == "iteration 7 on validation set");

  // PPL is exp(min(20, loss)); Python's min keeps 20 for a NaN loss.
  const std::string block = format_validation_block("iteration 1", {{"lm loss", 25.0}, {"x", std::nan("")}});
  CHECK(block.find("| lm loss value: 2.500000E+01 | lm loss PPL: 4.851652E+08 | x value: NAN | x PPL: 4.851652E+08 | \n") !=
        std::string::npos);
}

TEST_CASE("training log: startup and exit lines", "[train]") {
  CHECK(format_padded_vocab_line(50257, 50304) == " > padded vocab (size: 50257) with 47 dummy tokens (new size: 50304)");
  CHECK(format_building_tokenizer_line("GPT2BPETokenizer") == "> building GPT2BPETokenizer tokenizer ...");
  CHECK(format_datetime_line("exiting program at iteration 5", kStamp) ==
        "[exiting program at iteration 5] datetime: 2024-05-01 12:34:56.123456 ");
}

TEST_CASE("training log: timestamps as strftime with microseconds", "[train]") {
  ScopedTimeZone utc("UTC");
  using namespace std::chrono;
  const system_clock::time_point t{seconds{1714566896} + microseconds{123456}};
  CHECK(log_timestamp(t) == "2024-05-01 12:34:56.123456");
  CHECK(log_timestamp(system_clock::time_point{seconds{1714566896} + microseconds{7}}) == "2024-05-01 12:34:56.000007");
  CHECK(log_timestamp(system_clock::now()).size() == 26);
}

TEST_CASE("training log: loss accumulation between log lines", "[train]") {
  LossAccumulator acc;
  acc.add({{"lm loss", 2.0}}, false);
  acc.add({{"lm loss", 3.0}}, false);
  acc.add({{"lm loss", std::numeric_limits<double>::infinity()}}, true);  // skipped, not finite
  acc.add({{"lm loss", 1.0}}, true);                                      // skipped, finite
  CHECK(acc.advanced_iterations() == 2);
  CHECK(acc.skipped_iterations() == 2);
  CHECK(acc.nan_iterations() == 1);
  CHECK(acc.iterations() == 4);
  REQUIRE(acc.averages().size() == 1);
  CHECK(acc.averages()[0].first == "lm loss");
  CHECK(acc.averages()[0].second == 2.5);

  // Sums are float32, as Megatron's: 0.1f + 0.2f, then divided in double.
  acc.reset();
  CHECK(acc.iterations() == 0);
  acc.add({{"lm loss", 0.1}}, false);
  acc.add({{"lm loss", 0.2}}, false);
  CHECK(acc.averages()[0].second == static_cast<double>(0.1f + 0.2f) / 2.0);

  acc.reset();  // names survive; with no iteration the divisor is 1
  CHECK(acc.averages()[0].second == 0.0);
}

TEST_CASE("training log: metrics JSON lines", "[train]") {
  IterationLog g = sample_log();
  g.seconds_per_iteration = 0.25;
  g.tflops_per_gpu = 1.5;
  CHECK(iteration_metrics_json(g, kStamp) ==
        "{\"event\": \"train\", \"iteration\": 100, \"train_iters\": 1000, \"consumed_samples\": 800, "
        "\"skipped_samples\": 0, \"elapsed_ms_per_iteration\": 250.0, \"tokens_per_second\": 32768.0, "
        "\"tflops_per_gpu\": 1.5, \"learning_rate\": 0.0003, \"global_batch_size\": 8, \"lm_loss\": 2.345678912, "
        "\"loss_scale\": 1.0, \"grad_norm\": 1.23456, \"skipped_iterations\": 0, \"nan_iterations\": 0, "
        "\"timestamp\": \"2024-05-01 12:34:56.123456\"}");
  g.losses = {{"lm loss", std::nan("")}};
  CHECK(iteration_metrics_json(g, kStamp).find("\"lm_loss\": null") != std::string::npos);
  // The tensor-parallel collectives by operation, after the step phases.
  g.optimizer_ms = 7.5;
  g.tensor_parallel_comm_parts = {{"all_gather", true, 20.25, 4.5, 120.0}, {"all_reduce", false, 1.5, 1.5, 3.0}};
  CHECK(iteration_metrics_json(g, kStamp).find(
            "\"optimizer_ms\": 7.5, \"tensor_parallel_comm_by_operation\": {\"all_gather beside\": {\"ms\": 20.25, "
            "\"exposed_ms\": 4.5, \"count\": 120.0}, \"all_reduce on stream\": {\"ms\": 1.5, \"exposed_ms\": 1.5, "
            "\"count\": 3.0}}, \"timestamp\"") != std::string::npos);
  // Expert parallelism's dispatch after context parallelism's, by operation last.
  g.context_parallel_comm_ms = 3.0;
  g.context_parallel_comm_exposed_ms = 1.0;
  g.expert_parallel_comm_ms = 12.5;
  g.expert_parallel_comm_exposed_ms = 12.5;
  g.expert_parallel_comm_parts = {{"all_to_all", false, 12.5, 12.5, 64.0}};
  const std::string with_experts = iteration_metrics_json(g, kStamp);
  CHECK(with_experts.find("\"context_parallel_comm_exposed_ms\": 1.0, \"expert_parallel_comm_ms\": 12.5, "
                          "\"expert_parallel_comm_exposed_ms\": 12.5, \"optimizer_ms\"") != std::string::npos);
  CHECK(with_experts.find("\"expert_parallel_comm_by_operation\": {\"all_to_all on stream\": {\"ms\": 12.5, "
                          "\"exposed_ms\": 12.5, \"count\": 64.0}}, \"timestamp\"") != std::string::npos);

  CHECK(validation_metrics_json("validation", 100, {{"lm loss", 2.5}}, kStamp) ==
        "{\"event\": \"validation\", \"iteration\": 100, \"lm_loss\": 2.5, \"lm_loss_ppl\": 12.182493960703473, "
        "\"timestamp\": \"2024-05-01 12:34:56.123456\"}");
}

TEST_CASE("training log: throughput from the FLOPs formula", "[train]") {
  // GPT-2 small: B 8, s 1024, L 12, h 768, f 3072, n = g = 12, k 64, V 50304.
  // MLP 12·12·768·3072 = 339738624; attention 12·12·768²·(1 + 1 + 1024/1536)·1 = 226492416;
  // logits 6·768·50304 = 231800832; sum 798031872 × 8 × 1024 = 6537477095424.
  GptFlopsShape shape{8, 1024, 12, 768, 3072, 12, 12, 64, 50304, false};
  const double flops = gpt_flops_per_iteration(shape);
  CHECK(flops == Approx(6537477095424.0).epsilon(1e-12));
  CHECK(throughput_tflops_per_gpu(flops, 0.5, 2) == Approx(6.537477095424));

  shape.swiglu = true;  // MLP × 3/2
  CHECK(gpt_flops_per_iteration(shape) == Approx(6537477095424.0 + 0.5 * 339738624.0 * 8 * 1024).epsilon(1e-12));
  shape.swiglu = false;
  shape.num_query_groups = 4;  // (1 + 4/12 + 2/3) instead of (1 + 1 + 2/3)
  CHECK(gpt_flops_per_iteration(shape) ==
        Approx((339738624.0 + 12.0 * 12 * 768 * 768 * 2.0 + 231800832.0) * 8 * 1024).epsilon(1e-12));
  // Mixture of Experts (Megatron's count for moe_speed.sh's model): 16 layers of hidden 2048, all
  // MoE, 8 experts of 5632, top-2, SwiGLU, GQA 8 of 16 heads, sequence 4096, vocabulary 32000,
  // global batch 32: 1.186e15, the dense model of ffn 11264's count.
  GptFlopsShape moe{32, 4096, 16, 2048, 5632, 16, 8, 128, 32000, true, 16, 5632, 2, 0};
  GptFlopsShape dense = moe;
  dense.ffn_hidden_size = 11264;
  dense.num_moe_layers = 0;
  CHECK(gpt_flops_per_iteration(moe) == Approx(gpt_flops_per_iteration(dense)).epsilon(1e-12));
  CHECK(gpt_flops_per_iteration(moe) == Approx(1.186e15).epsilon(1e-3));
  // Every other layer MoE with a shared expert of 1024: those layers count 2·5632 + 1024.
  moe.num_moe_layers = 8;
  moe.moe_shared_expert_size = 1024;
  const double mlp = 12.0 * 2048 * 1.5 * (8 * 5632.0 + 8 * (2 * 5632.0 + 1024));
  const double attention = 12.0 * 16 * 2048.0 * 2048 * (1 + 0.5 + 4096 / 4096.0);
  CHECK(gpt_flops_per_iteration(moe) == Approx(32.0 * 4096 * (mlp + attention + 6.0 * 2048 * 32000)).epsilon(1e-12));
}

TEST_CASE("memory report line is Megatron's report_memory", "[trainer]") {
  const std::int64_t mib = 1024 * 1024;
  CHECK(format_memory_report(0, 1, 1536 * mib + mib / 2, 3000 * mib, 4096 * mib, 4096 * mib) ==
        "[Rank 0] (after 1 iterations) memory (MB) | allocated: 1536.5 | max allocated: 3000.0 | reserved: 4096.0 "
        "| max reserved: 4096.0");
}
