// Shared launch helpers for the CUDA kernels (included by .cu files only).
#pragma once
#include <cstdint>

#include "kernels/cuda_check.hpp"

namespace mgt::cuda {

constexpr int kThreads = 256;

// Whether a pointer can take 16-byte vector loads and stores (the kernels' vector paths).
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Blocks for a grid-stride loop over n elements: enough to fill the GPU, never more than n needs.
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 4 ? 65535 * 4 : blocks));
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
// `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

}  // namespace mgt::cuda
