#include "dist/nccl_event_pool.hpp"

#include "kernels/cuda_check.hpp"

namespace mgt::dist {

CudaEventPool::~CudaEventPool() {
  for (cudaEvent_t event : spares_) cudaEventDestroy(event);
}

cudaEvent_t CudaEventPool::take() {
  cudaEvent_t event = nullptr;
  if (spares_.empty()) {
    MGT_CUDA_CHECK(cudaEventCreateWithFlags(&event, flags_));
  } else {
    event = spares_.back();
    spares_.pop_back();
  }
  return event;
}

}  // namespace mgt::dist
