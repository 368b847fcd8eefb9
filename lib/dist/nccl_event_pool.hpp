// CUDA events for the NCCL communicator's bookkeeping, reused rather than created per operation:
// a training step queues hundreds of collectives.
#pragma once
#include <cuda_runtime_api.h>

#include <vector>

namespace mgt::dist {

class CudaEventPool {
public:
  // `flags`: cudaEventDisableTiming for events only waited on or queried, cudaEventDefault for
  // events that time.
  explicit CudaEventPool(unsigned flags) : flags_(flags) {}
  CudaEventPool(const CudaEventPool&) = delete;
  CudaEventPool& operator=(const CudaEventPool&) = delete;
  ~CudaEventPool();

  // A spare event, or a new one (on the current device).
  cudaEvent_t take();
  // Back for reuse: nothing may still wait on or query it (a stream's wait has captured its
  // state when cudaStreamWaitEvent returned).
  void give_back(cudaEvent_t event) { spares_.push_back(event); }

private:
  unsigned flags_;
  std::vector<cudaEvent_t> spares_;
};

}  // namespace mgt::dist
