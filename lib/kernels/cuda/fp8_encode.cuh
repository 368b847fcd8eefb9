// The device side of an FP8 cast that every cast kernel shares (fp8_quantize.cu's casts and the
// norm that writes FP8 in norms.cu), so that their codes and amax agree bit for bit: the encoding
// of eight values with the hardware's conversion and the block's amax folded into the history
// entry. Included by .cu files only.
#pragma once
#include <cuda_fp8.h>

#include <cstdint>

namespace mgt::cuda {

template <bool kE5M2>
constexpr __nv_fp8_interpretation_t kInterpretation = kE5M2 ? __NV_E5M2 : __NV_E4M3;

// The bits of |v| as an integer: ordered as the values for non-negative floats, NaN (whatever its
// sign; an abs.f32 of NaN gives an unspecified NaN, so the sign is cleared by hand) above +inf.
__device__ __forceinline__ int magnitude_bits(float v) { return __float_as_int(v) & 0x7fffffff; }

// Eight codes of v · scale, code j in byte j (cvt packs its first operand into the high byte,
// __nv_cvt_float2_to_fp8x2 puts x.x low). The product is rounded to fp32 first, as on the CPU.
template <bool kE5M2>
__device__ __forceinline__ uint2 encode8(const float (&v)[8], float scale) {
  uint32_t pairs[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    pairs[j] = __nv_cvt_float2_to_fp8x2(make_float2(__fmul_rn(v[2 * j], scale), __fmul_rn(v[2 * j + 1], scale)),
                                        __NV_SATFINITE, kInterpretation<kE5M2>);
  }
  return make_uint2(pairs[0] | pairs[1] << 16, pairs[2] | pairs[3] << 16);
}

__device__ __forceinline__ uint8_t code_at(uint2 codes, int j) {
  return static_cast<uint8_t>((j < 4 ? codes.x >> (8 * j) : codes.y >> (8 * (j - 4))) & 0xffu);
}

// The block's largest magnitude_bits, folded into *amax with one atomic (integer order is value
// order for the non-negative floats amax holds). Every thread of the block must call it.
__device__ __forceinline__ void record_block_amax(int bits, int* amax) {
  __shared__ int warp_max[32];
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) bits = max(bits, __shfl_xor_sync(0xffffffffu, bits, offset));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = bits;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) bits = max(bits, warp_max[w]);
    atomicMax(amax, bits);
  }
}

}  // namespace mgt::cuda
