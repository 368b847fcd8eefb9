#include "kernels/cuda/op_profiler.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "kernels/cuda_check.hpp"
#include "kernels/profile_timeline.hpp"

namespace mgt::cuda {
namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

OpProfiler::~OpProfiler() {
  for (const Span& s : spans_) {
    cudaEventDestroy(s.start);
    cudaEventDestroy(s.stop);
  }
}

bool OpProfiler::begin(const char* op) {
  if (!active_) return false;
  host_start_ = now_ms();
  Span s{op, nullptr, nullptr, 0.0, host_start_};
  MGT_CUDA_CHECK(cudaEventCreate(&s.start));
  MGT_CUDA_CHECK(cudaEventCreate(&s.stop));
  MGT_CUDA_CHECK(cudaEventRecord(s.start, stream_));
  spans_.push_back(s);
  return true;
}

void OpProfiler::end() {
  MGT_CUDA_CHECK(cudaEventRecord(spans_.back().stop, stream_));
  spans_.back().host_ms = now_ms() - host_start_;
}

void OpProfiler::write_timeline() const {
  if (timeline_.empty() || spans_.empty()) return;
  const Span& first = spans_.front();
  std::vector<TimelineRow> rows;
  rows.reserve(spans_.size());
  for (const Span& s : spans_) {
    float start = 0.0f, ms = 0.0f;
    MGT_CUDA_CHECK(cudaEventElapsedTime(&start, first.start, s.start));
    MGT_CUDA_CHECK(cudaEventElapsedTime(&ms, s.start, s.stop));
    rows.push_back({s.op, start, ms, s.host_begin - first.host_begin});
  }
  write_profile_timeline(timeline_, rows);
}

std::string OpProfiler::report() {
  MGT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  struct Totals {
    double gpu_ms = 0.0;
    long calls = 0;
    double host_ms = 0.0;
  };
  std::map<std::string, Totals> by_op;
  double total = 0.0;
  double host_total = 0.0;
  for (const Span& s : spans_) {
    float ms = 0.0f;
    MGT_CUDA_CHECK(cudaEventElapsedTime(&ms, s.start, s.stop));
    Totals& entry = by_op[s.op];
    entry.gpu_ms += ms;
    entry.calls += 1;
    entry.host_ms += s.host_ms;
    total += ms;
    host_total += s.host_ms;
  }
  write_timeline();
  std::vector<std::pair<std::string, Totals>> rows(by_op.begin(), by_op.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.gpu_ms > b.second.gpu_ms; });
  std::string text = "GPU time per operation (--profile), " + std::to_string(spans_.size()) +
                     " operations:\n";
  char line[160];
  for (const auto& [op, value] : rows) {
    std::snprintf(line, sizeof line, "  %-28s %10.2f ms %6.1f%% %8ld calls %10.2f ms host\n",
                  op.c_str(), value.gpu_ms, total > 0.0 ? 100.0 * value.gpu_ms / total : 0.0,
                  value.calls, value.host_ms);
    text += line;
  }
  std::snprintf(line, sizeof line, "  %-28s %10.2f ms %17s %10.2f ms host\n", "total", total, "",
                host_total);
  text += line;
  std::snprintf(line, sizeof line, "  %-28s %10.2f ms in %ld waits\n", "host_blocked", host_wait_ms_,
                host_waits_);
  return text + line;
}

}  // namespace mgt::cuda
