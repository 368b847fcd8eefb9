// Element-wise operations on the GPU (fills, sums, activations, dropout), with the formulas of
// kernels/cpu/{elementwise,gelu,swiglu,dropout}.hpp; dropout draws the CPU's Philox stream bit
// for bit. Outputs may alias inputs wherever the CPU versions allow it.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/elements.hpp"

#include "kernels/cpu/dropout.hpp"

namespace mgt::cuda {

void fill(Out x, int64_t n, float value, cudaStream_t stream);
// y = x converted to y's type (rounded to nearest even).
void convert(In x, int64_t n, Out y, cudaStream_t stream);
// out = a + b, or a + b + c where c is not null.
void add(In a, In b, In c, int64_t n, Out out, cudaStream_t stream);
void accumulate(Out y, In x, int64_t n, cudaStream_t stream);
void scale(Out x, int64_t n, float factor, cudaStream_t stream);
// y[r, c] += bias[c].
void add_bias(Out y, In bias, int64_t rows, int64_t cols, cudaStream_t stream);
// dloss[r] = loss_mask[r] · scale.
void masked_loss_grad(const float* loss_mask, int64_t rows, float scale, float* dloss,
                      cudaStream_t stream);

void gelu_forward(In x, int64_t n, Out y, cudaStream_t stream);
void gelu_backward(In dy, In x, int64_t n, Out dx, cudaStream_t stream);
void gelu_tanh_forward(In x, int64_t n, Out y, cudaStream_t stream);
void gelu_tanh_backward(In dy, In x, int64_t n, Out dx,
                        cudaStream_t stream);
// kernels/cpu/squared_relu.hpp.
void squared_relu_forward(In x, int64_t n, Out y, cudaStream_t stream);
void squared_relu_backward(In dy, In x, int64_t n, Out dx, cudaStream_t stream);
void swiglu_forward(In x, int64_t rows, int64_t ffn, Out y, cudaStream_t stream);
void swiglu_backward(In dy, In x, int64_t rows, int64_t ffn, Out dx,
                     cudaStream_t stream);

void dropout(In x, int64_t n, float p, DropoutKey key, Out y,
             cudaStream_t stream);
// kernels/cpu/dropout.hpp uniform_jitter, the same Philox words.
void uniform_jitter(In x, int64_t n, float eps, DropoutKey key, Out y, cudaStream_t stream);
// kernels/cpu/dropout.hpp standard_normal, the same Philox words and formula (in double).
void standard_normal(int64_t n, DropoutKey key, Out y, cudaStream_t stream);

}  // namespace mgt::cuda
