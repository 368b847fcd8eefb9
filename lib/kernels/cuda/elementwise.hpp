// Element-wise operations on the GPU (fills, sums, activations, dropout), with the formulas of
// kernels/cpu/{elementwise,gelu,swiglu,dropout}.hpp; dropout draws the CPU's Philox stream bit
// for bit. Outputs may alias inputs wherever the CPU versions allow it.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cpu/dropout.hpp"

namespace mgt::cuda {

void fill(float* x, int64_t n, float value, cudaStream_t stream);
void add(const float* a, const float* b, int64_t n, float* out, cudaStream_t stream);
void accumulate(float* y, const float* x, int64_t n, cudaStream_t stream);
void scale(float* x, int64_t n, float factor, cudaStream_t stream);
// y[r, c] += bias[c].
void add_bias(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);
// dloss[r] = loss_mask[r] · scale.
void masked_loss_grad(const float* loss_mask, int64_t rows, float scale, float* dloss,
                      cudaStream_t stream);

void gelu_forward(const float* x, int64_t n, float* y, cudaStream_t stream);
void gelu_backward(const float* dy, const float* x, int64_t n, float* dx, cudaStream_t stream);
void gelu_tanh_forward(const float* x, int64_t n, float* y, cudaStream_t stream);
void gelu_tanh_backward(const float* dy, const float* x, int64_t n, float* dx,
                        cudaStream_t stream);
void swiglu_forward(const float* x, int64_t rows, int64_t ffn, float* y, cudaStream_t stream);
void swiglu_backward(const float* dy, const float* x, int64_t rows, int64_t ffn, float* dx,
                     cudaStream_t stream);

void dropout(const float* x, int64_t n, float p, cpu::DropoutKey key, float* y,
             cudaStream_t stream);

}  // namespace mgt::cuda
