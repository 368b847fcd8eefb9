// Optimizer support on the GPU: AdamW with the semantics of kernels/cpu/adamw.hpp, and the sum of
// squares behind the global gradient norm, accumulated in double in a fixed order.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/copy_range.hpp"
#include "kernels/cpu/adamw.hpp"
#include "kernels/cuda/elements.hpp"

namespace mgt::cuda {

void adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                const AdamWParams& params, int64_t step, cudaStream_t stream);

// *result = Σ x² (device memory).
// adamw_step over segments in one launch (Backend::adamw_update); segment_ends and
// segment_flags are device arrays of `segments` elements; compute may be null (no weight copy).
void adamw_update(float* param, const float* grad, Out exp_avg, Out exp_avg_sq, int64_t n,
                  const int64_t* segment_ends, const int64_t* segment_flags, int64_t segments,
                  const AdamWParams& params, float decoupled_lr, float grad_scale,
                  int64_t step, Out compute, cudaStream_t stream);

void sum_of_squares(const float* x, int64_t n, double* result, cudaStream_t stream);
// *result = Σ over the ranges of x of Σ x², each range summed as sum_of_squares sums it and the
// ranges' sums added in order (so the same bits as a loop of sum_of_squares added on the host).
void sum_of_squares(const float* x, const ElementRange* ranges, std::size_t n, double* result,
                    cudaStream_t stream);

}  // namespace mgt::cuda
