// The NCCL communicator's timing of its operations with CUDA events, for the per-group
// communication times of the training log (Communicator::take_overlap_timing): an operation
// queued on the caller's stream is timed there between two events; a started one (on the side
// stream, beside the compute) between two events on the side stream, with a third on the
// caller's stream where it was waited for, so that the part of its time the compute waited is
// known. Nothing here synchronises: take() reads only the events that have completed.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <deque>

#include "dist/communicator.hpp"
#include "dist/nccl_event_pool.hpp"

namespace mgt::dist {

class NcclOperationTiming {
public:
  NcclOperationTiming() = default;
  NcclOperationTiming(const NcclOperationTiming&) = delete;
  NcclOperationTiming& operator=(const NcclOperationTiming&) = delete;
  ~NcclOperationTiming();

  // Just before an operation's NCCL call on the caller's `stream`: the event that starts its
  // timing there.
  void mark_begin(cudaStream_t stream);
  // After it: the event that ends it (nothing when no begin was marked).
  void end_in_stream(const char* operation, cudaStream_t stream);
  // An operation that returns complete (staged through the host) is not timed: its begin goes.
  void drop_begin();

  // A started operation: its begin on `side` now, its end on `side` after its calls; the
  // serial number names it for waited_for().
  std::uint64_t begin_started(cudaStream_t side);
  void end_started(const char* operation, cudaStream_t side);
  // The serial number of the operation begin_started() began last.
  std::uint64_t last_started() const { return first_started_ + started_.size() - 1; }
  // Where the caller's `stream` waits for started operation `serial`: the event that marks it,
  // and the wait.
  void waited_for(std::uint64_t serial, cudaStream_t stream);

  // The completed operations' times since the last call, oldest first; a started operation not
  // yet waited for or not yet complete (a gather the next forward has yet to wait for) stays for
  // the next call. The caller's device must be current.
  OverlapTiming take();

private:
  // A started operation's events: `begin` and `end` on the side stream around it, `waited` on
  // the caller's stream where the wait was asked for (null until then).
  struct Started {
    cudaEvent_t begin = nullptr;
    cudaEvent_t end = nullptr;
    cudaEvent_t waited = nullptr;
    const char* operation = "";  // InFlightOperation::operation, a literal
  };
  // One queued on the caller's stream, between two events there.
  struct InStream {
    cudaEvent_t begin = nullptr;
    cudaEvent_t end = nullptr;
    const char* operation = "";
  };
  // Where nobody takes the timings, the finished ones are dropped now and then.
  static constexpr std::size_t kMaxTimed = 1 << 16;

  Started& started(std::uint64_t serial) { return started_.at(static_cast<std::size_t>(serial - first_started_)); }

  CudaEventPool events_{cudaEventDefault};
  std::deque<Started> started_;       // not yet taken, oldest first
  std::uint64_t first_started_ = 0;   // serial number of started_.front()
  std::deque<InStream> in_stream_;    // not yet taken, oldest first
  cudaEvent_t pending_begin_ = nullptr;  // mark_begin()'s, until end_in_stream() or drop_begin()
};

}  // namespace mgt::dist
