#include "dist/nccl_queue_watch.hpp"

#include "kernels/cuda_check.hpp"

namespace mgt::dist {

NcclQueueWatch::~NcclQueueWatch() {
  while (!queued_.empty()) release_oldest();
}

void NcclQueueWatch::watch(const InFlightOperation& op, cudaStream_t stream) {
  if (!watchdog_) return;
  cudaEvent_t done = events_.take();
  MGT_CUDA_CHECK(cudaEventRecord(done, stream));
  // Asked on the watchdog's thread, past the deadline only; that thread's current device
  // must be this one, or the query could start a context on another GPU.
  const int device = device_;
  queued_.push_back({done, watchdog_->watch(op, [done, device] {
                       return cudaSetDevice(device) == cudaSuccess && cudaEventQuery(done) == cudaSuccess;
                     })});
}

void NcclQueueWatch::retire_completed() {
  while (!queued_.empty()) {
    const cudaError_t status = cudaEventQuery(queued_.front().done);
    if (status == cudaErrorNotReady) return;
    if (status != cudaSuccess) MGT_CUDA_CHECK(status);
    release_oldest();
  }
}

void NcclQueueWatch::release_oldest() {
  Queued& oldest = queued_.front();
  oldest.watch.reset();  // the watchdog stops asking about the event before it is reused
  events_.give_back(oldest.done);
  queued_.pop_front();
}

}  // namespace mgt::dist
