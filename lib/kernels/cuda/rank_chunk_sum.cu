#include "kernels/rank_chunk_sum.hpp"

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

// The ranks' loop unrolled over the fixed bound, so that the pieces' pointers stay in registers
// rather than a copy of the parameter array in local memory.
template <class T>
__global__ void sum_pieces_kernel(RankPieces pieces, int ranks, int64_t count, T* out) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count; i += step) {
    float sum = widen(static_cast<const T*>(pieces.piece[0])[i]);
#pragma unroll
    for (int r = 1; r < kMaxRankPieces; ++r)
      if (r < ranks) sum += widen(static_cast<const T*>(pieces.piece[r])[i]);
    out[i] = narrow<T>(sum);
  }
}

// fp32 with every piece and `out` 16-byte aligned: four elements per access.
__global__ void sum_pieces_float4_kernel(RankPieces pieces, int ranks, int64_t groups, float4* out) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < groups; i += step) {
    float4 sum = static_cast<const float4*>(pieces.piece[0])[i];
#pragma unroll
    for (int r = 1; r < kMaxRankPieces; ++r) {
      if (r < ranks) {
        const float4 v = static_cast<const float4*>(pieces.piece[r])[i];
        sum.x += v.x;
        sum.y += v.y;
        sum.z += v.z;
        sum.w += v.w;
      }
    }
    out[i] = sum;
  }
}

template <class T>
void launch_pieces(const RankPieces& pieces, int ranks, int64_t count, void* out, cudaStream_t stream) {
  sum_pieces_kernel<T><<<grid_for(count), kThreads, 0, stream>>>(pieces, ranks, count, static_cast<T*>(out));
  MGT_CUDA_CHECK_LAUNCH("sum_rank_pieces");
}

void launch_float_pieces(const RankPieces& pieces, int ranks, int64_t count, void* out, cudaStream_t stream) {
  bool aligned = aligned16(out);
  for (int r = 0; r < ranks; ++r) aligned = aligned && aligned16(pieces.piece[r]);
  if (!aligned) return launch_pieces<float>(pieces, ranks, count, out, stream);
  const int64_t groups = count / 4;
  if (groups > 0) {
    sum_pieces_float4_kernel<<<grid_for(groups), kThreads, 0, stream>>>(pieces, ranks, groups, static_cast<float4*>(out));
    MGT_CUDA_CHECK_LAUNCH("sum_rank_pieces");
  }
  if (count == groups * 4) return;
  RankPieces tail;
  for (int r = 0; r < ranks; ++r) tail.piece[r] = static_cast<const float*>(pieces.piece[r]) + groups * 4;
  launch_pieces<float>(tail, ranks, count - groups * 4, static_cast<float*>(out) + groups * 4, stream);
}

}  // namespace

void sum_rank_pieces(const RankPieces& pieces, int ranks, int64_t count, ChunkType type, void* out,
                     cudaStream_t stream) {
  if (count == 0) return;
  switch (type) {
    case ChunkType::kF32: launch_float_pieces(pieces, ranks, count, out, stream); break;
    case ChunkType::kBf16: launch_pieces<__nv_bfloat16>(pieces, ranks, count, out, stream); break;
    case ChunkType::kF16: launch_pieces<__half>(pieces, ranks, count, out, stream); break;
  }
}

}  // namespace mgt::cuda
