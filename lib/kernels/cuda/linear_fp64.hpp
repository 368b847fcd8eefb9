// The MoE router's gating linear layer in fp64 (--moe-router-dtype fp64; Backend::
// linear_forward_fp64 and linear_backward_fp64): every product and sum in double, each result
// rounded to float and then to its operand's type. The layer is small (the experts are its
// outputs): plain kernels, not a GEMM library's fp64 routines on converted copies.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/elements.hpp"

namespace mgt::cuda {

// y[rows, out] = x[rows, in] · w[out, in]ᵀ.
void linear_forward_fp64(In x, In w, int64_t rows, int64_t in, int64_t out, Out y, cudaStream_t stream);

// dx[rows, in] = dy[rows, out] · w, where dx is not null.
void linear_backward_input_fp64(In dy, In w, int64_t rows, int64_t in, int64_t out, Out dx, cudaStream_t stream);

// Rows per partial sum of the weight gradient: `partial` holds
// weight_gradient_fp64_chunks(rows) · out · in doubles.
constexpr int64_t kFp64GradientChunkRows = 256;
inline int64_t weight_gradient_fp64_chunks(int64_t rows) {
  return (rows + kFp64GradientChunkRows - 1) / kFp64GradientChunkRows;
}

// dw[out, in] (+)= dyᵀ · x: each chunk of rows summed apart, the chunks then added in order (and
// after dw's old value with `accumulate`): the same sums whatever the launch, no atomics.
void linear_backward_weight_fp64(In dy, In x, int64_t rows, int64_t in, int64_t out, Out dw, bool accumulate,
                                 double* partial, cudaStream_t stream);

}  // namespace mgt::cuda
