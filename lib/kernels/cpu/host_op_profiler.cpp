#include "kernels/cpu/host_op_profiler.hpp"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "kernels/profile_timeline.hpp"

namespace mgt::cpu {

HostOpProfiler::HostOpProfiler(std::string timeline) : timeline_(std::move(timeline)) {}

void HostOpProfiler::leave(const char* op, Clock::time_point begin) {
  const Clock::time_point end = Clock::now();
  Totals& entry = by_op_[op];
  const double ms = std::chrono::duration<double, std::milli>(end - begin).count();
  entry.ms += ms;
  entry.calls += 1;
  if (!timeline_.empty()) {
    if (!started_) {
      first_ = begin;
      started_ = true;
    }
    spans_.push_back({op, std::chrono::duration<double, std::milli>(begin - first_).count(), ms});
  }
}

void HostOpProfiler::write_timeline() const {
  // The CUDA backend's columns: on the CPU an operation starts when the host begins it.
  std::vector<TimelineRow> rows;
  rows.reserve(spans_.size());
  for (const Span& s : spans_) rows.push_back({s.op, s.begin_ms, s.ms, s.begin_ms});
  write_profile_timeline(timeline_, rows);
}

std::string HostOpProfiler::report() const {
  write_timeline();
  std::vector<std::pair<std::string, Totals>> rows(by_op_.begin(), by_op_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double total = 0.0;
  long operations = 0;
  for (const auto& [op, value] : rows) {
    total += value.ms;
    operations += value.calls;
  }
  std::string text = "CPU time per operation (--profile), " + std::to_string(operations) + " operations:\n";
  char line[160];
  for (const auto& [op, value] : rows) {
    std::snprintf(line, sizeof line, "  %-28s %10.2f ms %6.1f%% %8ld calls\n", op.c_str(), value.ms,
                  total > 0.0 ? 100.0 * value.ms / total : 0.0, value.calls);
    text += line;
  }
  std::snprintf(line, sizeof line, "  %-28s %10.2f ms\n", "total", total);
  return text + line;
}

ScopedHostOp::ScopedHostOp(HostOpProfiler* profiler, BackendOp op) : profiler_(profiler), op_(backend_op_name(op)) {
  if (profiler_ == nullptr) return;
  counted_ = profiler_->enter();
  if (counted_) begin_ = HostOpProfiler::Clock::now();
}

ScopedHostOp::~ScopedHostOp() {
  if (profiler_ == nullptr) return;
  if (counted_) profiler_->leave(op_, begin_);
  profiler_->exit();
}

}  // namespace mgt::cpu
