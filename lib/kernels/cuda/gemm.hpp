// The linear layers' GEMMs on the GPU through cuBLAS, row-major as kernels/cpu/linear.hpp:
// y[rows, out] = x[rows, in]·W[out, in]ᵀ; dx = dy·W; dW += dyᵀ·x. fp32 inputs use full fp32
// arithmetic (no TF32) with kFp32, so results stay within fp32 rounding of the CPU; kBf16 rounds
// the inputs to bf16 on the tensor cores and accumulates in fp32.
#pragma once
#include <cstdint>

#include <cublas_v2.h>

#include "kernels/backend.hpp"

namespace mgt::cuda {

using MatmulPrecision = Backend::MatmulPrecision;

void linear_forward(cublasHandle_t handle, MatmulPrecision precision, const float* x, const float* w, int64_t rows,
                    int64_t in, int64_t out, float* y);
void linear_backward_input(cublasHandle_t handle, MatmulPrecision precision, const float* dy, const float* w, int64_t rows,
                           int64_t in, int64_t out, float* dx);
void linear_backward_weight(cublasHandle_t handle, MatmulPrecision precision, const float* dy, const float* x, int64_t rows,
                            int64_t in, int64_t out, float* dw);

}  // namespace mgt::cuda
