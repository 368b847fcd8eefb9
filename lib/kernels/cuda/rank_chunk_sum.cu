#include "kernels/cuda/rank_chunk_sum.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/launch.cuh"

namespace mgt::cuda {
namespace {

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }

template <class T>
__device__ __forceinline__ T narrow(float v);
template <>
__device__ __forceinline__ float narrow<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half narrow<__half>(float v) { return __float2half_rn(v); }

template <class T>
__global__ void sum_kernel(const T* chunks, int ranks, int64_t count, T* out) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count; i += step) {
    float sum = widen(chunks[i]);
    for (int r = 1; r < ranks; ++r) sum += widen(chunks[r * count + i]);
    out[i] = narrow<T>(sum);
  }
}

template <class T>
void launch(const void* chunks, int ranks, int64_t count, void* out, cudaStream_t stream) {
  sum_kernel<T><<<grid_for(count), kThreads, 0, stream>>>(static_cast<const T*>(chunks), ranks, count,
                                                            static_cast<T*>(out));
  MGT_CUDA_CHECK_LAUNCH("sum_rank_chunks");
}

}  // namespace

void sum_rank_chunks(const void* chunks, int ranks, int64_t count, ChunkType type, void* out, cudaStream_t stream) {
  if (count == 0) return;
  switch (type) {
    case ChunkType::kF32: launch<float>(chunks, ranks, count, out, stream); break;
    case ChunkType::kBf16: launch<__nv_bfloat16>(chunks, ranks, count, out, stream); break;
    case ChunkType::kF16: launch<__half>(chunks, ranks, count, out, stream); break;
  }
}

}  // namespace mgt::cuda
