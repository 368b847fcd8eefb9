// Optional per-operation GPU timing for the CUDA backend (--profile): each operation is
// bracketed by two CUDA events on the backend's stream, and at the end of the run the time per
// operation family is printed, largest first, with its share of the total. The events are only
// read at the end, so profiling does not add synchronisation to the step. set_active(false)
// pauses the counting (mgt-train's --profile counts only the iterations of its step window, so
// that the first iterations' plan builds and algorithm timing stay out of the table).
#pragma once
#include <cuda_runtime_api.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/backend_operation.hpp"

namespace mgt::cuda {

class OpProfiler {
public:
  // `timeline` (--profile-timeline): the CSV file report() also writes; empty: none.
  OpProfiler(cudaStream_t stream, std::string timeline) : stream_(stream), timeline_(std::move(timeline)) {}
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;
  ~OpProfiler();

  void set_active(bool active) { active_ = active; }
  // Whether the operation is counted (end() is then due).
  bool begin(const char* op);
  void end();
  // Host time spent blocked waiting for the stream (synchronisation, read-backs): large when the
  // GPU is the bottleneck, near zero when the host cannot issue work fast enough.
  void add_host_wait(double ms) {
    if (!active_) return;
    host_wait_ms_ += ms;
    ++host_waits_;
  }
  // The table of accumulated times, one line per operation (synchronises the stream). With a
  // timeline file, also every counted operation as a CSV line of it: name,
  // GPU start and duration, and the host's clock when it began issuing it, in ms from the first
  // operation's (where the GPU's start trails the host's by little, the GPU waited for the host).
  std::string report();

private:
  void write_timeline() const;
  struct Span {
    const char* op;
    cudaEvent_t start;
    cudaEvent_t stop;
    double host_ms;     // host time from the start event to the stop event: issuing the work
    double host_begin;  // host clock at the start event (ms), for the timeline
  };
  cudaStream_t stream_;
  std::string timeline_;
  std::vector<Span> spans_;
  double host_start_ = 0.0;
  double host_wait_ms_ = 0.0;
  long host_waits_ = 0;
  bool active_ = true;
};

// Brackets one operation when a profiler is present (null: no cost beyond a branch).
class ScopedOp {
public:
  // Counted under the operation's name in the list (kernels/backend_operations.inc).
  ScopedOp(OpProfiler* profiler, BackendOp op)
      : profiler_(profiler != nullptr && profiler->begin(backend_op_name(op)) ? profiler : nullptr) {}
  ~ScopedOp() {
    if (profiler_ != nullptr) profiler_->end();
  }
  ScopedOp(const ScopedOp&) = delete;
  ScopedOp& operator=(const ScopedOp&) = delete;

private:
  OpProfiler* profiler_;
};

}  // namespace mgt::cuda
