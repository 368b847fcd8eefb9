// The linear layers' GEMMs on the GPU through cuBLAS, row-major as kernels/cpu/linear.hpp:
// y[rows, out] = x[rows, in]·W[out, in]ᵀ; dx = dy·W; dW += dyᵀ·x. fp32 inputs use full fp32
// arithmetic (no TF32) with kFp32, so results stay within fp32 rounding of the CPU; kBf16 (kFp16)
// rounds fp32 inputs to bf16 (fp16) on the tensor cores and accumulates in fp32. bf16 and fp16
// operands (reduced-precision storage) always multiply on the tensor cores with fp32 accumulation.
#pragma once
#include <cstdint>

#include <cublas_v2.h>

#include "kernels/backend.hpp"
#include "kernels/cuda/elements.hpp"
#include "kernels/cuda/lt_matmul.hpp"

namespace mgt::cuda {

using MatmulPrecision = Backend::MatmulPrecision;

// The cuBLAS type of a storage type.
cudaDataType_t data_type(FloatType type);

// Operands of the same type (fp32, or bf16/fp16 storage) each; dw may be fp32 under 2-byte operands
// (fp32 gradient accumulation).
// 2-byte operands go through cuBLASLt (lt), fp32 ones through cuBLAS (handle). Returns whether the
// bias (may be null) was added in the GEMM's epilogue; if not, the caller adds it.
bool linear_forward(cublasHandle_t handle, LtMatmul& lt, MatmulPrecision precision, In x, In w,
                    In bias, int64_t rows, int64_t in, int64_t out, Out y);
void linear_backward_input(cublasHandle_t handle, LtMatmul& lt, MatmulPrecision precision, In dy,
                           In w, int64_t rows, int64_t in, int64_t out, Out dx);
// dw += dyᵀ·x, or without `accumulate` dw = dyᵀ·x.
void linear_backward_weight(cublasHandle_t handle, LtMatmul& lt, MatmulPrecision precision, In dy,
                            In x, int64_t rows, int64_t in, int64_t out, Out dw, bool accumulate);

// Megatron's fused bias-GELU in the GEMM's epilogue: pre = x·Wᵀ + b, y = gelu_tanh(pre); and the
// input gradient through it, dpre = (dy·W) ⊙ gelu_tanh'(pre). 2-byte operands only, pre of the
// output's type, rows of whole 16-byte vectors; false (nothing done) otherwise.
bool linear_gelu_tanh_forward(LtMatmul& lt, In x, In w, In bias, int64_t rows, int64_t in, int64_t out,
                              Out pre, Out y);
bool linear_backward_input_gelu_tanh(LtMatmul& lt, In dy, In w, In pre, int64_t rows, int64_t in,
                                     int64_t out, Out dpre);

}  // namespace mgt::cuda
