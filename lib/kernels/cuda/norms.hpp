// Row normalisations and column reductions on the GPU, with the semantics of
// kernels/cpu/{layer_norm,rms_norm,linear}.hpp: mean and rstd saved per row; weight and bias
// gradients accumulated (+=) in a fixed order, so results do not depend on scheduling.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/elements.hpp"

namespace mgt::cuda {

void layer_norm_forward(In x, In weight, In bias, int64_t rows,
                        int64_t hidden, float eps, Out y, float* mean, float* rstd,
                        cudaStream_t stream);
// dx = the input gradient, or with accumulate_dx dx += it (rounded once to dx's type).
void layer_norm_backward(In dy, In x, In weight, const float* mean,
                         const float* rstd, int64_t rows, int64_t hidden, Out dx, bool accumulate_dx,
                         float* dweight, float* dbias, cudaStream_t stream);
void rms_norm_forward(In x, In weight, int64_t rows, int64_t hidden, float eps,
                      Out y, float* rstd, cudaStream_t stream);
void rms_norm_backward(In dy, In x, In weight, const float* rstd,
                       int64_t rows, int64_t hidden, Out dx, bool accumulate_dx, float* dweight,
                       cudaStream_t stream);

// sum = a + b (+ c where not null), then LayerNorm (mean not null) or RMSNorm (mean and bias null) of sum, in one
// kernel. Returns false, having done nothing, where the rows cannot be read eight elements at a
// time: the caller adds and normalises separately.
bool add_norm_forward(In a, In b, In c, In weight, In bias, int64_t rows, int64_t hidden, float eps, Out sum, Out y,
                      float* mean, float* rstd, cudaStream_t stream);

// dbias[c] += Σ_r dy[r, c].
void bias_backward(In dy, int64_t rows, int64_t cols, float* dbias, cudaStream_t stream);

}  // namespace mgt::cuda
