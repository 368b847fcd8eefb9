// Softmax cross-entropy on the GPU, whole or over a rank's slice of the vocabulary, and the row-wise
// reductions around it, as kernels/cpu/{cross_entropy,argmax}.hpp define them.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/elements.hpp"

namespace mgt::cuda {

// statistics [3, rows]: this slice's row maxima, sums of exp(logit − maximum), target logits.
void cross_entropy_shard_statistics(In logits, const int64_t* targets, int64_t rows,
                                    int64_t vocab, int64_t vocab_start, float* statistics,
                                    cudaStream_t stream);
// statistics [ranks, 3, rows] combined in rank order.
void cross_entropy_combine(const float* statistics, int64_t ranks, int64_t rows, float* loss,
                           float* row_max, float* sum_exp, cudaStream_t stream);
// All steps over an unsharded vocabulary, one pass per row.
void cross_entropy_forward(In logits, const int64_t* targets, int64_t rows,
                           int64_t vocab, float* loss, float* row_max, float* sum_exp,
                           cudaStream_t stream);
// dlogits may alias logits.
void cross_entropy_backward(In logits, const int64_t* targets, const float* row_max,
                            const float* sum_exp, const float* dloss, int64_t rows, int64_t vocab,
                            int64_t vocab_start, Out dlogits, cudaStream_t stream);
// cross_entropy_forward and cross_entropy_backward (vocab_start 0) in one kernel; dlogits may
// alias logits.
void cross_entropy_forward_backward(In logits, const int64_t* targets, const float* dloss,
                                    int64_t rows, int64_t vocab, float* loss, Out dlogits,
                                    cudaStream_t stream);

// sums = [Σ loss·mask, Σ mask], or with `accumulate` added to them.
void masked_loss_sum(const float* loss, const float* loss_mask, int64_t rows, double* sums, bool accumulate,
                     cudaStream_t stream);
// out[r] = first index of the row's maximum.
void row_argmax(In x, int64_t rows, int64_t cols, int64_t row_stride, int64_t* out, cudaStream_t stream);

}  // namespace mgt::cuda
