#include <algorithm>
#include <cstddef>

#include "kernels/cuda/grouped_gemm_pointers.hpp"
#include "kernels/cuda/launch.cuh"

namespace mgt::cuda {
namespace {

// 3840 bytes of addresses per launch, under the 4 KiB of kernel argument every GPU takes.
constexpr int kPointersPerLaunch = 480;

struct PointerBatch {
  const void* pointers[kPointersPerLaunch];
};

__global__ void write_pointers_kernel(PointerBatch batch, int n, const void** dst) {
  const int i = static_cast<int>(threadIdx.x);
  if (i < n) dst[i] = batch.pointers[i];
}

}  // namespace

void write_device_pointers(const void* const* pointers, std::size_t n, const void** dst, cudaStream_t stream) {
  for (std::size_t first = 0; first < n; first += kPointersPerLaunch) {
    const std::size_t count = std::min<std::size_t>(kPointersPerLaunch, n - first);
    PointerBatch batch{};
    std::copy(pointers + first, pointers + first + count, batch.pointers);
    write_pointers_kernel<<<1, kPointersPerLaunch, 0, stream>>>(batch, static_cast<int>(count), dst + first);
    MGT_CUDA_CHECK_LAUNCH(write_pointers_kernel);
  }
}

}  // namespace mgt::cuda
