// The CPU's FP8 arithmetic: the casts of kernels/fp8.hpp applied to whole tensors, and the FP8
// GEMM emulated as decoded values times their scale_inv in an fp32 GEMM, so that FP8 training
// runs on CPU ranks with the same scales and histories as on a GPU.
#pragma once
#include <cstdint>

#include "kernels/fp8.hpp"

namespace mgt::cpu {

// max |x[i]| over n elements (0 for none; NaN where any is NaN).
float absolute_max(const float* x, int64_t n);

// codes[i] = fp8_encode(x[i] · scale); into rowwise [rows, cols] and/or transposed [cols, rows]
// (null: not wanted).
void fp8_cast(const float* x, int64_t rows, int64_t cols, float scale, Fp8Format format, uint8_t* rowwise,
              uint8_t* transposed);

// out[i] = fp8_decode(codes[i]) · scale_inv.
void fp8_dequantize(const uint8_t* codes, int64_t n, Fp8Format format, float scale_inv, float* out);

}  // namespace mgt::cpu
