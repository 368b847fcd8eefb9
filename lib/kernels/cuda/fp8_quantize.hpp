// FP8 casts on the GPU (Backend::fp8_quantize, and the dequantization behind fp8_linear's fallback),
// with the hardware's conversion: cvt.rn.satfinite, round to nearest even, finite values and
// infinities beyond the largest finite value saturate to it, NaN becomes 0x7F. That is
// fp8_encode of kernels/fp8.cpp code for code, so the GPU's codes equal the CPU backend's.
//
// One pass over x writes the row-major codes and/or the transposed ones (the transpose through a
// shared-memory tile, so both outputs are written in whole sectors), and, under delayed scaling,
// records max |x| into amax. Under current scaling a first pass takes max |x| and the cast pass
// derives the scale from it on the device: nothing waits for the host.
//
// amax: the maximum is taken on the bit patterns of |x| as integers, which orders non-negative
// floats as their values and puts NaN above infinity: a NaN anywhere in x makes the recorded amax
// NaN (it is not lost, as it would be by fmaxf). The delayed-scaling update then keeps the scale of
// a tensor whose most recent amax is NaN, and the max over a history passes over NaNs
// (fp8_delayed_scaling_update), so one step's NaN does not poison later scales.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/elements.hpp"

// Included by .cu files, compiled as C++17: the formats come as plain values, not kernels/fp8.hpp's.
namespace mgt::cuda {

// An FP8 format: E5M2 (else E4M3) and its largest finite value (fp8_max).
struct Fp8CastFormat {
  bool e5m2 = false;
  float max = 448.0f;
};

// One output of a cast: codes (null: not wanted) and where 1/scale goes.
struct Fp8CastOutput {
  uint8_t* codes = nullptr;
  float* scale_inv = nullptr;
};

// x [rows, cols] · scale → FP8 codes of `format`: into rowwise [rows, cols] and transposed
// [cols, rows] (either may have no codes). Delayed scaling (current false): scale is read; amax,
// where not null, becomes max(amax, max |x|). Current scaling: amax is overwritten with max |x|
// and scale with fp8_current_scale(amax, format), then used.
void fp8_quantize(In x, int64_t rows, int64_t cols, float* scale, float* amax, bool current, Fp8CastFormat format,
                  Fp8CastOutput rowwise, Fp8CastOutput transposed, cudaStream_t stream);

// The output gradient's cast of a linear layer's backward with what Backend::fp8_quantize_gradient
// fuses into it, in one pass under delayed scaling: g = dy, or, with pre, gelu_tanh_grad(dy, pre)
// rounded to dy's type (pre of dy's type), stored to dpre where that is not null (it may be dy);
// g cast into rowwise and transposed (both wanted), amax (where not null) recording max |g|;
// dbias (fp32, where not null) += Σ_rows g (= without accumulate_dbias), summed in a fixed order.
// Returns false, having done
// nothing, unless rows % 16 == 0, cols % 8 == 0 and every operand is 16-byte aligned: the caller
// then composes the steps.
bool fp8_quantize_gradient(In dy, In pre, int64_t rows, int64_t cols, float* scale, float* amax, Fp8CastFormat format,
                           Fp8CastOutput rowwise, Fp8CastOutput transposed, float* dbias, bool accumulate_dbias,
                           Out dpre, cudaStream_t stream);

// The forward cast of an MLP's activation, in one pass under delayed scaling: gelu_tanh(pre) rounded
// to pre's type (what gelu_tanh_forward stores) cast into rowwise and/or transposed, amax (where not
// null) recording its max |·|; the activation itself is never written. Returns false, having done
// nothing, where fp8_quantize_gradient would (the shapes and alignments of its one pass).
bool fp8_quantize_gelu_tanh(In pre, int64_t rows, int64_t cols, float* scale, float* amax, Fp8CastFormat format,
                            Fp8CastOutput rowwise, Fp8CastOutput transposed, cudaStream_t stream);

// out[i] = value(codes[i]) · *scale_inv in fp32 (one rounding, as the CPU's fp8_dequantize).
void fp8_dequantize(const uint8_t* codes, int64_t n, bool e5m2, const float* scale_inv, float* out,
                    cudaStream_t stream);

}  // namespace mgt::cuda
