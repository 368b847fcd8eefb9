#include "kernels/cuda/cuda_event.hpp"

#include "kernels/cuda/cuda_check.hpp"

namespace mgt::cuda {
namespace {

class CudaEvent final : public QueueEvent {
public:
  explicit CudaEvent(cudaStream_t stream) {
    MGT_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    const cudaError_t recorded = cudaEventRecord(event_, stream);
    if (recorded != cudaSuccess) {
      cudaEventDestroy(event_);
      MGT_CUDA_CHECK(recorded);
    }
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  ~CudaEvent() override { cudaEventDestroy(event_); }
  void wait() override { MGT_CUDA_CHECK(cudaEventSynchronize(event_)); }

private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace

std::unique_ptr<QueueEvent> record_event(cudaStream_t stream) { return std::make_unique<CudaEvent>(stream); }

}  // namespace mgt::cuda
