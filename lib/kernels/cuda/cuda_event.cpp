#include "kernels/cuda/cuda_event.hpp"

#include "core/error.hpp"
#include "kernels/cuda_check.hpp"

namespace mgt::cuda {
namespace {

class CudaEvent final : public QueueEvent {
public:
  CudaEvent(cudaStream_t stream, bool timed) {
    MGT_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timed ? cudaEventDefault : cudaEventDisableTiming));
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
  double seconds_since(QueueEvent& earlier) override {
    auto* e = dynamic_cast<CudaEvent*>(&earlier);
    if (e == nullptr) throw Error("QueueEvent::seconds_since: an event of another backend");
    wait();
    float ms = 0.0f;
    MGT_CUDA_CHECK(cudaEventElapsedTime(&ms, e->event_, event_));
    return ms / 1e3;
  }

private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace

std::unique_ptr<QueueEvent> record_event(cudaStream_t stream, bool timed) {
  return std::make_unique<CudaEvent>(stream, timed);
}

}  // namespace mgt::cuda
