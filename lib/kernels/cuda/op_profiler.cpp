#include "kernels/cuda/op_profiler.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "kernels/cuda/cuda_check.hpp"

namespace mgt::cuda {

bool OpProfiler::requested() {
  const char* value = std::getenv("MGT_CUDA_PROFILE");
  return value != nullptr && value[0] != '\0' && value[0] != '0';
}

OpProfiler::~OpProfiler() {
  for (const Span& s : spans_) {
    cudaEventDestroy(s.start);
    cudaEventDestroy(s.stop);
  }
}

void OpProfiler::begin(const char* op) {
  Span s{op, nullptr, nullptr};
  MGT_CUDA_CHECK(cudaEventCreate(&s.start));
  MGT_CUDA_CHECK(cudaEventCreate(&s.stop));
  MGT_CUDA_CHECK(cudaEventRecord(s.start, stream_));
  spans_.push_back(s);
}

void OpProfiler::end() { MGT_CUDA_CHECK(cudaEventRecord(spans_.back().stop, stream_)); }

std::string OpProfiler::report() {
  MGT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::map<std::string, std::pair<double, long>> by_op;
  double total = 0.0;
  for (const Span& s : spans_) {
    float ms = 0.0f;
    MGT_CUDA_CHECK(cudaEventElapsedTime(&ms, s.start, s.stop));
    auto& entry = by_op[s.op];
    entry.first += ms;
    entry.second += 1;
    total += ms;
  }
  std::vector<std::pair<std::string, std::pair<double, long>>> rows(by_op.begin(), by_op.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::string text = "GPU time per operation (MGT_CUDA_PROFILE), " + std::to_string(spans_.size()) +
                     " operations:\n";
  char line[160];
  for (const auto& [op, value] : rows) {
    std::snprintf(line, sizeof line, "  %-28s %10.2f ms %6.1f%% %8ld calls\n", op.c_str(),
                  value.first, total > 0.0 ? 100.0 * value.first / total : 0.0, value.second);
    text += line;
  }
  std::snprintf(line, sizeof line, "  %-28s %10.2f ms\n", "total", total);
  return text + line;
}

}  // namespace mgt::cuda
