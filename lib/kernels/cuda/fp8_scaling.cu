#include "kernels/cuda/fp8_scaling.hpp"

#include <climits>
#include <string>

#include "core/error.hpp"
#include "kernels/cuda/launch.cuh"

namespace mgt::cuda {
namespace {

constexpr int kUpdateThreads = 256;

// One block per tensor (transformer_engine/common/recipe/delayed_scaling.cu does the same): its
// column of the history is rolled towards the front (row i takes row i+1, the last row the old
// row 0, row 0 zeroed for the next amaxes) while the largest entry is taken, then the scale.
__global__ void __launch_bounds__(kUpdateThreads)
    scaling_update_kernel(float* history, float* scale, int64_t tensors, int64_t length, bool max_algo,
                          float scaled_max) {
  __shared__ float warp_largest[kUpdateThreads / 32];
  float* const column = history + blockIdx.x;
  const float last = column[0];
  // fmaxf passes over NaN, as std::fmax does on the CPU; starting from 0, as the CPU does.
  float largest = 0.0f;
  for (int64_t first = 0; first < length; first += kUpdateThreads) {
    const int64_t i = first + threadIdx.x;
    float moved = 0.0f;
    if (i < length) {
      moved = i + 1 < length ? column[(i + 1) * tensors] : last;
      largest = fmaxf(largest, moved);
    }
    // In place: every read of this chunk's successors happens before any write of the chunk. A
    // chunk's last thread reads the next chunk's first row, which is written only after the next
    // round's barrier, so that read is safe too.
    __syncthreads();
    if (i < length) column[i * tensors] = i > 0 ? moved : 0.0f;
  }
  if (!max_algo) {
    if (threadIdx.x == 0 && isfinite(last) && last > 0.0f) scale[blockIdx.x] = __fdiv_rn(scaled_max, last);
    return;
  }
  largest = warp_max(largest);
  if (threadIdx.x % 32 == 0) warp_largest[threadIdx.x / 32] = largest;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kUpdateThreads / 32; ++w) largest = fmaxf(largest, warp_largest[w]);
    // IEEE division, the CPU's scaled_max / amax to the bit.
    if (isfinite(largest) && largest > 0.0f) scale[blockIdx.x] = __fdiv_rn(scaled_max, largest);
  }
}

}  // namespace

void fp8_scaling_update(float* history, float* scale, int64_t tensors, int64_t history_len, bool max_algo,
                        float scaled_max, cudaStream_t stream) {
  if (tensors == 0) return;
  if (tensors > INT_MAX) throw Error("fp8_scaling_update: " + std::to_string(tensors) + " tensors are too many");
  scaling_update_kernel<<<static_cast<unsigned>(tensors), kUpdateThreads, 0, stream>>>(
      history, scale, tensors, history_len, max_algo, scaled_max);
  MGT_CUDA_CHECK_LAUNCH(scaling_update_kernel);
}

}  // namespace mgt::cuda
