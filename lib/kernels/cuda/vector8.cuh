// Eight consecutive elements of an In/Out operand moved as one 16-byte access (bf16, fp16) or
// two (fp32), so row kernels keep enough bytes in flight to run at memory bandwidth. The caller
// checks vectorizable(): base pointers 16-byte aligned and rows a multiple of 8 elements.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <initializer_list>

#include "kernels/cuda/elements.hpp"
#include "kernels/cuda/launch.cuh"

namespace mgt::cuda {

// Eight-element group `v` (elements 8v … 8v+7) of p.
// The type is chosen once per group (a uniform branch), not per element: narrow_to_float's choice
// repeated for each of the eight took several instructions an element, which the norms and casts,
// bound by their instruction count, paid.
__device__ __forceinline__ void load8(In p, int64_t v, float (&out)[8]) {
  if (p.narrow()) {
    const uint4 w = static_cast<const uint4*>(p.raw())[v];
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
    if (p.bf16()) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        out[2 * j] = __uint_as_float(words[j] << 16);
        out[2 * j + 1] = __uint_as_float(words[j] & 0xffff0000u);
      }
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&words[j]));
        out[2 * j] = f.x;
        out[2 * j + 1] = f.y;
      }
    }
  } else {
    const float4* f = static_cast<const float4*>(p.raw()) + 2 * v;
    const float4 a = f[0];
    const float4 b = f[1];
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
  }
}

__device__ __forceinline__ void store8(Out p, int64_t v, const float (&in)[8]) {
  if (p.narrow()) {
    uint32_t words[4];
    if (p.bf16()) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const __nv_bfloat162 b = __floats2bfloat162_rn(in[2 * j], in[2 * j + 1]);
        words[j] = *reinterpret_cast<const uint32_t*>(&b);
      }
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const __half2 h = __floats2half2_rn(in[2 * j], in[2 * j + 1]);
        words[j] = *reinterpret_cast<const uint32_t*>(&h);
      }
    }
    static_cast<uint4*>(p.raw())[v] = make_uint4(words[0], words[1], words[2], words[3]);
  } else {
    float4* f = static_cast<float4*>(p.raw()) + 2 * v;
    f[0] = make_float4(in[0], in[1], in[2], in[3]);
    f[1] = make_float4(in[4], in[5], in[6], in[7]);
  }
}

inline bool vectorizable(int64_t row_length, std::initializer_list<const void*> pointers) {
  if (row_length % 8 != 0) return false;
  for (const void* p : pointers)
    if (p != nullptr && !aligned16(p)) return false;
  return true;
}

}  // namespace mgt::cuda
