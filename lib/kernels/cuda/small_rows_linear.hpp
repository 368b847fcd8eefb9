// The linear layer y[rows, out] = x[rows, in]·W[out, in]ᵀ (+ bias) for the few rows of a decode
// step: one warp per output reads its row of W once, in 16-byte vectors, and dots it with every
// row of x. A GEMM's tiles would mostly multiply padding there, and W's bytes, read at memory
// bandwidth, are the whole cost. Accumulates in fp32 like the GEMMs. With a GELU epilogue it is
// also Megatron's fused bias-GELU: pre = x·Wᵀ + b, y = gelu_tanh(pre).
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/elements.hpp"

namespace mgt::cuda {

// The most rows the kernel takes.
constexpr int64_t kSmallRowsMax = 8;

// False, with nothing done, where it does not apply: more than kSmallRowsMax rows, `in` not a
// multiple of 8, or x and W not 16-byte aligned. bias may be null; pre non-null: the GELU
// epilogue (y = gelu_tanh of pre as stored, so rounding matches the unfused operations).
bool small_rows_linear(In x, In w, In bias, int64_t rows, int64_t in, int64_t out, Out pre, Out y,
                       cudaStream_t stream);

}  // namespace mgt::cuda
