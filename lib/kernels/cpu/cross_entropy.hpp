// Softmax cross-entropy over vocabulary rows. A rank holding only the vocabulary slice
// [vocab_start, vocab_start + vocab) of each row (Megatron's vocab-parallel cross entropy,
// tensor_parallel/cross_entropy.py) takes one pass over it for its statistics (maximum, sum of
// exponentials relative to it, target logit or 0), the ranks all-gather them, and each combines
// them in rank order: loss = (max − target) + log Σ_k sum_k·exp(max_k − max). Megatron
// all-reduces the maximum, then the sums and target logits (three passes, three collectives);
// the result is the same up to rounding. The backward needs no communication:
//   dlogits = (exp(logit − max) / sum_exp − onehot(target)) · dloss.
// Per-token losses are unmasked; masked_loss_sum and masked_loss_grad apply the loss mask the way
// Megatron's loss_func does (Σ loss·mask over Σ mask).
#pragma once
#include <cstdint>

#include "kernels/operation_params.hpp"

namespace mgt::cpu {

// logits: [rows, vocab], this rank's slice; row_max, sum_exp, target_logit: [rows] each.
void cross_entropy_shard_statistics(const float* logits, const int64_t* targets, int64_t rows,
                                    int64_t vocab, int64_t vocab_start, float* row_max,
                                    float* sum_exp, float* target_logit);

// statistics: [ranks, 3, rows], each rank's row_max, sum_exp and target_logit above.
void cross_entropy_combine(const float* statistics, int64_t ranks, int64_t rows, float* loss,
                           float* row_max, float* sum_exp);

// The loss on an unsharded vocabulary; row_max and sum_exp are kept for the backward.
void cross_entropy_forward(const float* logits, const int64_t* targets, int64_t rows,
                           int64_t vocab, float* loss, float* row_max, float* sum_exp);

// dlogits[rows, vocab] (overwritten) for the local slice; dloss: [rows]. dlogits may alias logits.
void cross_entropy_backward(const float* logits, const int64_t* targets, const float* row_max,
                            const float* sum_exp, const float* dloss, int64_t rows, int64_t vocab,
                            int64_t vocab_start, float* dlogits);

MaskedLossSum masked_loss_sum(const float* loss, const float* loss_mask, int64_t rows);

// dloss[rows] = loss_mask · scale; scale is usually 1 / (number of unmasked tokens in the batch).
void masked_loss_grad(const float* loss_mask, int64_t rows, float scale, float* dloss);

}  // namespace mgt::cpu
