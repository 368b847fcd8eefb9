// Row normalisations and column reductions on the GPU, with the semantics of
// kernels/cpu/{layer_norm,rms_norm,linear}.hpp: mean and rstd saved per row; weight and bias
// gradients accumulated (+=, or written over without accumulate_params / accumulate) in a fixed
// order, so results do not depend on scheduling.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/elements.hpp"
#include "kernels/cuda/fp8_quantize.hpp"

namespace mgt::cuda {

void layer_norm_forward(In x, In weight, In bias, int64_t rows,
                        int64_t hidden, float eps, Out y, float* mean, float* rstd,
                        cudaStream_t stream);
// dx = the input gradient, or with accumulate_dx dx += it (rounded once to dx's type).
void layer_norm_backward(In dy, In x, In weight, const float* mean,
                         const float* rstd, int64_t rows, int64_t hidden, Out dx, bool accumulate_dx,
                         float* dweight, float* dbias, bool accumulate_params, cudaStream_t stream);
void rms_norm_forward(In x, In weight, int64_t rows, int64_t hidden, float eps,
                      Out y, float* rstd, cudaStream_t stream);
void rms_norm_backward(In dy, In x, In weight, const float* rstd,
                       int64_t rows, int64_t hidden, Out dx, bool accumulate_dx, float* dweight,
                       bool accumulate_params, cudaStream_t stream);

// sum = a + b (+ c where not null), then LayerNorm (mean not null) or RMSNorm (mean and bias null) of sum, in one
// kernel. Returns false, having done nothing, where the rows cannot be read eight elements at a
// time: the caller adds and normalises separately.
bool add_norm_forward(In a, In b, In c, In weight, In bias, int64_t rows, int64_t hidden, float eps, Out sum, Out y,
                      float* mean, float* rstd, cudaStream_t stream);

// The norm of add_norm_forward (with residual: of sum = x + residual (+ extra); without: of x,
// sum unused) whose output, rounded to the type of the norm's input as the norm would store it,
// is cast into FP8 codes [rows, hidden] with *scale (delayed scaling) instead of being stored:
// the codes, amax (where not null: max(amax, max |y|)) and scale_inv are fp8_quantize's, bit for
// bit, as mean and rstd are the norm's. Returns false, having done nothing, where the rows cannot
// be read eight elements at a time or the codes are not 8-byte aligned: the caller composes the
// steps.
bool fp8_norm_forward(In x, In residual, In extra, In weight, In bias, int64_t rows, int64_t hidden, float eps,
                      Out sum, float* mean, float* rstd, const float* scale, float* amax, Fp8CastFormat format,
                      Fp8CastOutput codes, cudaStream_t stream);

// dbias[c] += Σ_r dy[r, c] (= without `accumulate`).
void bias_backward(In dy, int64_t rows, int64_t cols, float* dbias, bool accumulate, cudaStream_t stream);

}  // namespace mgt::cuda
