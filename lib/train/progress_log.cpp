#include "train/progress_log.hpp"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <utility>
#include <vector>

#include "core/log.hpp"

namespace mgt {

namespace {

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t tab = line.find('\t', begin);
    fields.push_back(line.substr(begin, tab == std::string::npos ? std::string::npos : tab - begin));
    if (tab == std::string::npos) return fields;
    begin = tab + 1;
  }
}

// The value of a "Name: value" field (Megatron's _get_field: what follows ": ").
std::optional<std::string> field_value(const std::string& field) {
  const std::size_t colon = field.find(": ");
  if (colon == std::string::npos) return std::nullopt;
  return field.substr(colon + 2);
}

std::optional<double> number(const std::optional<std::string>& text) {
  if (!text || text->empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text->c_str(), &end);
  if (end != text->c_str() + text->size()) return std::nullopt;
  return value;
}

std::string local_time_stamp(ProgressLog::Clock::time_point t) {
  const std::time_t seconds = ProgressLog::Clock::to_time_t(t);
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

std::optional<ProgressLog::Clock::time_point> parse_local_time_stamp(const std::string& text) {
  std::tm local{};
  std::istringstream in(text);
  in >> std::get_time(&local, "%Y-%m-%d %H:%M:%S");
  if (in.fail()) return std::nullopt;
  local.tm_isdst = -1;
  const std::time_t seconds = std::mktime(&local);
  if (seconds == static_cast<std::time_t>(-1)) return std::nullopt;
  return ProgressLog::Clock::from_time_t(seconds);
}

std::string printf_text(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

}  // namespace

std::optional<ProgressLogStart> find_progress_log_start(const std::string& text, std::int64_t world_size) {
  std::optional<ProgressLogStart> start;
  double latest_flops = 0.0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const std::vector<std::string> fields = split_tabs(line);
    if (fields.size() < 4) continue;
    const std::optional<double> gpus = number(field_value(fields[2]));
    if (!gpus) continue;
    if (fields[3] == "Saved checkpoint" && fields.size() > 7)
      if (const std::optional<double> flops = number(field_value(fields[7]))) latest_flops = *flops;
    if (*gpus != static_cast<double>(world_size)) {
      start.reset();  // another world size: the series starts again
      continue;
    }
    if (fields[3] == "Starting job" && !start) start = ProgressLogStart{fields[0], latest_flops};
  }
  return start;
}

std::string progress_log_line(const std::string& time_stamp, const std::string& job_id, std::int64_t world_size,
                              const std::string& event) {
  return time_stamp + "\tJob ID: " + job_id + "\t# GPUs: " + std::to_string(world_size) + "\t" + event + "\n";
}

std::string progress_after_save_event(const ProgressAfterSave& p) {
  return std::string(p.background ? "Saving async checkpoint" : "Saved checkpoint") +
         "\tIteration: " + std::to_string(p.iteration) +
         "\tJob throughput: " + printf_text("%.1f", p.job_tflops_per_gpu) + " TFLOP/s/GPU" +
         "\tCumulative throughput: " + printf_text("%.1f", p.cumulative_tflops_per_gpu) + " TFLOP/s/GPU" +
         "\tFloating-point operations: " + printf_text("%.2e", p.floating_point_operations_so_far) +
         "\tTokens (in billions): " + printf_text("%.2f", p.tokens_so_far / 1e9);
}

ProgressLog::ProgressLog(std::string save_dir, std::string job_id, std::int64_t world_size,
                         Clock::time_point job_start)
    : path_(std::move(save_dir) + "/progress.txt"),
      job_id_(std::move(job_id)),
      world_size_(world_size),
      job_start_(job_start) {}

void ProgressLog::job_started(Clock::time_point now) { append("Starting job", now); }

void ProgressLog::checkpoint_saved(std::int64_t iteration, bool background, double flops_so_far,
                                   double tokens_so_far, Clock::time_point now) {
  const double tera_world = 1e12 * static_cast<double>(world_size_);
  const auto seconds_since = [&](Clock::time_point t) {
    return std::chrono::duration<double>(now - t).count();
  };
  ProgressAfterSave p;
  p.iteration = iteration;
  p.background = background;
  p.floating_point_operations_so_far = flops_so_far;
  p.tokens_so_far = tokens_so_far;
  const double job_seconds = seconds_since(job_start_);
  if (job_seconds > 0) p.job_tflops_per_gpu = (flops_so_far - job_start_flops_) / (job_seconds * tera_world);
  std::ifstream in(path_);
  std::stringstream text;
  text << in.rdbuf();
  if (const std::optional<ProgressLogStart> start = find_progress_log_start(text.str(), world_size_))
    if (const std::optional<Clock::time_point> t = parse_local_time_stamp(start->time_stamp)) {
      const double seconds = seconds_since(*t);
      if (seconds > 0)
        p.cumulative_tflops_per_gpu = (flops_so_far - start->floating_point_operations) / (seconds * tera_world);
    }
  append(progress_after_save_event(p), now);
}

void ProgressLog::background_save_finished(std::int64_t iteration, Clock::time_point now) {
  append("Saved async checkpoint\tIteration: " + std::to_string(iteration), now);
}

void ProgressLog::append(const std::string& event, Clock::time_point now) {
  const std::string line = progress_log_line(local_time_stamp(now), job_id_, world_size_, event);
  std::ofstream out(path_, std::ios::app | std::ios::binary);
  out << line;
  out.flush();
  if (!out) log::warn("--log-progress: cannot append to " + path_ + "; training goes on without the line");
}

}  // namespace mgt
