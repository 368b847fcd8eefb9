// Row normalisations and column reductions on the GPU, with the semantics of
// kernels/cpu/{layer_norm,rms_norm,linear}.hpp: mean and rstd saved per row; weight and bias
// gradients accumulated (+=) in a fixed order, so results do not depend on scheduling.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace mgt::cuda {

void layer_norm_forward(const float* x, const float* weight, const float* bias, int64_t rows,
                        int64_t hidden, float eps, float* y, float* mean, float* rstd,
                        cudaStream_t stream);
void layer_norm_backward(const float* dy, const float* x, const float* weight, const float* mean,
                         const float* rstd, int64_t rows, int64_t hidden, float* dx,
                         float* dweight, float* dbias, cudaStream_t stream);
void rms_norm_forward(const float* x, const float* weight, int64_t rows, int64_t hidden, float eps,
                      float* y, float* rstd, cudaStream_t stream);
void rms_norm_backward(const float* dy, const float* x, const float* weight, const float* rstd,
                       int64_t rows, int64_t hidden, float* dx, float* dweight,
                       cudaStream_t stream);

// dbias[c] += Σ_r dy[r, c].
void bias_backward(const float* dy, int64_t rows, int64_t cols, float* dbias, cudaStream_t stream);

}  // namespace mgt::cuda
