// Shared launch helpers for the CUDA kernels (included by .cu files only).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

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

// Programmatic dependent launch (Hopper): the small kernels of a decode step are latency-bound, so
// a kernel launched by launch_early may start while the kernel before it in the stream still runs
// and load what does not depend on it (weights, the cache of earlier steps) meanwhile. Such a
// kernel must call wait_for_previous_kernels() before it reads anything that a kernel still
// running may write, and before it writes anything: the wait returns once every earlier kernel
// has finished and its writes are visible. let_next_kernel_start() lets the next launch_early
// kernel be scheduled before this one ends; it never lets it past its wait.
__device__ __forceinline__ void wait_for_previous_kernels() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void let_next_kernel_start() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

template <typename... Params, typename... Args>
void launch_early(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute early{};
  early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = stream;
  config.attrs = &early;
  config.numAttrs = 1;
  MGT_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace mgt::cuda
