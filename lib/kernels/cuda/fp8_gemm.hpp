// The FP8 linear layer's GEMM on Hopper's tensor cores (Backend::fp8_linear) through cuBLASLt,
// as transformer_engine/common/gemm/cublaslt_gemm.cu runs it: per-tensor scale_inv factors given
// to cuBLASLt as device pointers, fp32 accumulation, the bias in the epilogue where cuBLASLt takes
// it for y's type.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/elements.hpp"
#include "kernels/cuda/lt_matmul.hpp"
#include "kernels/fp8_view.hpp"

namespace mgt::cuda {

// y[rows, out] = (x·wᵀ)·sx·sw + bias (+ y with accumulate) for x [rows, in] and w [out, in] in FP8;
// bias (may be null) of any type. Returns false, having done nothing, where cuBLASLt's FP8 GEMMs
// cannot take the operands (a dimension not a multiple of 16, a pointer not 16-byte aligned, no
// algorithm): the caller computes it another way. Throws for E5M2 · E5M2, which no FP8 GEMM takes.
bool fp8_linear(LtMatmul& lt, ConstFp8View x, ConstFp8View w, In bias, int64_t rows, int64_t in, int64_t out,
                Out y, bool accumulate, Fp8GemmRole role, cudaStream_t stream);

// The same GEMM with the GELU in its epilogue (bf16 or fp16 pre and y; bias, which may be null, of
// their type): pre = (x·wᵀ)·sx·sw + bias, y = gelu_tanh(pre). false where the epilogue cannot be
// used, having done nothing.
bool fp8_linear_gelu_tanh_forward(LtMatmul& lt, ConstFp8View x, ConstFp8View w, In bias, int64_t rows, int64_t in,
                                  int64_t out, Out pre, Out y);

}  // namespace mgt::cuda
