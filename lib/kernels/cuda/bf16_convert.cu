#include "kernels/cuda/bf16_convert.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "kernels/cuda/launch.cuh"

namespace mgt::cuda {
namespace {

struct CopyBatch {
  Bf16Copy copies[kMaxBf16Copies];
};

// One copy per blockIdx.y. Vector: every pointer is 16-byte (fp32) / 8-byte (bf16) aligned, so
// four elements move as one float4 and one 8-byte word; the tail of n % 4 elements goes singly.
template <bool kToBf16, bool kVector>
__global__ void convert_kernel(CopyBatch batch) {
  const Bf16Copy c = batch.copies[blockIdx.y];
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t quads = kVector ? c.n / 4 : 0;
  for (int64_t i = first; i < quads; i += step) {
    if constexpr (kToBf16) {
      const float4 v = static_cast<const float4*>(c.src)[i];
      const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y);
      const __nv_bfloat162 hi = __floats2bfloat162_rn(v.z, v.w);
      uint2 packed;
      packed.x = *reinterpret_cast<const uint32_t*>(&lo);
      packed.y = *reinterpret_cast<const uint32_t*>(&hi);
      static_cast<uint2*>(c.dst)[i] = packed;
    } else {
      const uint2 packed = static_cast<const uint2*>(c.src)[i];
      const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&packed.x));
      const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&packed.y));
      static_cast<float4*>(c.dst)[i] = make_float4(lo.x, lo.y, hi.x, hi.y);
    }
  }
  for (int64_t i = 4 * quads + first; i < c.n; i += step) {
    if constexpr (kToBf16) {
      static_cast<__nv_bfloat16*>(c.dst)[i] = __float2bfloat16_rn(static_cast<const float*>(c.src)[i]);
    } else {
      static_cast<float*>(c.dst)[i] = __bfloat162float(static_cast<const __nv_bfloat16*>(c.src)[i]);
    }
  }
}

__global__ void store_pair_kernel(int64_t* dst, int64_t a, int64_t b) {
  dst[0] = a;
  dst[1] = b;
}

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <bool kToBf16>
void convert(std::initializer_list<Bf16Copy> copies, cudaStream_t stream) {
  if (copies.size() == 0) return;
  if (copies.size() > static_cast<size_t>(kMaxBf16Copies)) {
    throw Error("bf16 conversion: " + std::to_string(copies.size()) + " copies in one launch, at most " +
                std::to_string(kMaxBf16Copies));
  }
  CopyBatch batch{};
  int count = 0;
  int64_t longest = 0;
  bool vector = true;
  for (const Bf16Copy& c : copies) {
    batch.copies[count++] = c;
    longest = std::max(longest, c.n);
    const uintptr_t src_align = kToBf16 ? 16 : 8;
    const uintptr_t dst_align = kToBf16 ? 8 : 16;
    vector = vector && aligned(c.src, src_align) && aligned(c.dst, dst_align);
  }
  if (longest == 0) return;
  const dim3 grid(grid_for(vector ? (longest + 3) / 4 : longest), static_cast<unsigned>(count));
  if (vector) {
    convert_kernel<kToBf16, true><<<grid, kThreads, 0, stream>>>(batch);
  } else {
    convert_kernel<kToBf16, false><<<grid, kThreads, 0, stream>>>(batch);
  }
  MGT_CUDA_CHECK_LAUNCH(convert_kernel);
}

}  // namespace

void fp32_to_bf16(std::initializer_list<Bf16Copy> copies, cudaStream_t stream) {
  convert<true>(copies, stream);
}

void bf16_to_fp32(std::initializer_list<Bf16Copy> copies, cudaStream_t stream) {
  convert<false>(copies, stream);
}

void store_int64_pair(int64_t* dst, int64_t a, int64_t b, cudaStream_t stream) {
  store_pair_kernel<<<1, 1, 0, stream>>>(dst, a, b);
  MGT_CUDA_CHECK_LAUNCH(store_pair_kernel);
}

}  // namespace mgt::cuda
