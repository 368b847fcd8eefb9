#include "dist/nccl_operation_timing.hpp"

#include <algorithm>
#include <utility>

#include "kernels/cuda_check.hpp"

namespace mgt::dist {

NcclOperationTiming::~NcclOperationTiming() {
  for (const Started& t : started_)
    for (cudaEvent_t event : {t.begin, t.end, t.waited})
      if (event) cudaEventDestroy(event);
  for (const InStream& t : in_stream_) {
    cudaEventDestroy(t.begin);
    cudaEventDestroy(t.end);
  }
  if (pending_begin_) cudaEventDestroy(pending_begin_);
}

void NcclOperationTiming::mark_begin(cudaStream_t stream) {
  if (!pending_begin_) pending_begin_ = events_.take();
  MGT_CUDA_CHECK(cudaEventRecord(pending_begin_, stream));
}

void NcclOperationTiming::end_in_stream(const char* operation, cudaStream_t stream) {
  cudaEvent_t begin = std::exchange(pending_begin_, nullptr);
  if (!begin) return;
  if (in_stream_.size() >= kMaxTimed) take();
  cudaEvent_t end = events_.take();
  MGT_CUDA_CHECK(cudaEventRecord(end, stream));
  in_stream_.push_back({begin, end, operation});
}

void NcclOperationTiming::drop_begin() {
  if (cudaEvent_t begin = std::exchange(pending_begin_, nullptr)) events_.give_back(begin);
}

std::uint64_t NcclOperationTiming::begin_started(cudaStream_t side) {
  if (started_.size() >= kMaxTimed) take();
  Started t;
  t.begin = events_.take();
  MGT_CUDA_CHECK(cudaEventRecord(t.begin, side));
  started_.push_back(t);
  return first_started_ + started_.size() - 1;
}

void NcclOperationTiming::end_started(const char* operation, cudaStream_t side) {
  Started& t = started_.back();
  t.operation = operation;
  t.end = events_.take();
  MGT_CUDA_CHECK(cudaEventRecord(t.end, side));
}

void NcclOperationTiming::waited_for(std::uint64_t serial, cudaStream_t stream) {
  Started& t = started(serial);
  t.waited = events_.take();
  MGT_CUDA_CHECK(cudaEventRecord(t.waited, stream));
  MGT_CUDA_CHECK(cudaStreamWaitEvent(stream, t.end, 0));
}

OverlapTiming NcclOperationTiming::take() {
  OverlapTiming timing;
  // Oldest first, up to the first one not waited for or not complete (a gather the next
  // forward has yet to wait for): those stay for the next call.
  while (!started_.empty()) {
    Started& t = started_.front();
    if (!t.waited || cudaEventQuery(t.waited) != cudaSuccess || cudaEventQuery(t.end) != cudaSuccess) break;
    float busy = 0.0f, exposed = 0.0f;
    MGT_CUDA_CHECK(cudaEventElapsedTime(&busy, t.begin, t.end));
    MGT_CUDA_CHECK(cudaEventElapsedTime(&exposed, t.waited, t.end));
    // The compute stream may reach its wait a few microseconds before the side stream, held by
    // its own wait for the start, begins the collective: that is latency of the hand-over, not
    // communication, so no collective counts as waited for longer than it ran.
    const float waited = std::clamp(exposed, 0.0f, busy);
    timing.busy_seconds += busy / 1e3;
    timing.exposed_seconds += waited / 1e3;
    ++timing.operations;
    timing.add_part(t.operation, true, busy / 1e3, waited / 1e3);
    for (cudaEvent_t event : {t.begin, t.end, t.waited}) events_.give_back(event);
    started_.pop_front();
    ++first_started_;
  }
  while (!in_stream_.empty()) {
    const InStream timed = in_stream_.front();
    if (cudaEventQuery(timed.end) != cudaSuccess) break;
    float ms = 0.0f;
    MGT_CUDA_CHECK(cudaEventElapsedTime(&ms, timed.begin, timed.end));
    timing.in_stream_seconds += ms / 1e3;
    ++timing.in_stream_operations;
    timing.add_part(timed.operation, false, ms / 1e3, ms / 1e3);
    events_.give_back(timed.begin);
    events_.give_back(timed.end);
    in_stream_.pop_front();
  }
  cudaGetLastError();  // a query's cudaErrorNotReady is not sticky, but clear it all the same
  return timing;
}

}  // namespace mgt::dist
