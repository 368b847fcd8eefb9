// Softmax cross-entropy over vocabulary rows, split into the steps of Megatron's vocab-parallel
// cross entropy (tensor_parallel/cross_entropy.py) so that a rank holding only the vocabulary
// slice [vocab_start, vocab_start + vocab) of each row can interleave all-reduces:
//   1. cross_entropy_row_max        → all-reduce(max)
//   2. cross_entropy_sum_exp        (with the global max) → all-reduce(sum)
//   3. cross_entropy_target_logit   (zero where the target is not local) → all-reduce(sum)
//   4. cross_entropy_loss: loss = log(sum_exp) + max − target_logit
// On one rank, cross_entropy_forward runs all four. The backward needs no communication:
//   dlogits = (exp(logit − max) / sum_exp − onehot(target)) · dloss.
// Per-token losses are unmasked; masked_loss_sum and masked_loss_grad apply the loss mask the way
// Megatron's loss_func does (Σ loss·mask over Σ mask).
#pragma once
#include <cstdint>

namespace mgt::cpu {

// logits: [rows, vocab] local slice; row_max: [rows].
void cross_entropy_row_max(const float* logits, int64_t rows, int64_t vocab, float* row_max);

// sum_exp[rows] = Σ_local exp(logit − row_max).
void cross_entropy_sum_exp(const float* logits, const float* row_max, int64_t rows, int64_t vocab,
                           float* sum_exp);

// target_logit[rows] = logits[r, targets[r] − vocab_start] when the target is local, else 0.
void cross_entropy_target_logit(const float* logits, const int64_t* targets, int64_t rows,
                                int64_t vocab, int64_t vocab_start, float* target_logit);

// loss[rows] from the (reduced) statistics.
void cross_entropy_loss(const float* row_max, const float* sum_exp, const float* target_logit,
                        int64_t rows, float* loss);

// Steps 1-4 on an unsharded vocabulary; row_max and sum_exp are kept for the backward.
void cross_entropy_forward(const float* logits, const int64_t* targets, int64_t rows,
                           int64_t vocab, float* loss, float* row_max, float* sum_exp);

// dlogits[rows, vocab] (overwritten) for the local slice; dloss: [rows]. dlogits may alias logits.
void cross_entropy_backward(const float* logits, const int64_t* targets, const float* row_max,
                            const float* sum_exp, const float* dloss, int64_t rows, int64_t vocab,
                            int64_t vocab_start, float* dlogits);

struct MaskedLossSum {
  double loss_sum = 0.0;  // Σ loss·mask
  double tokens = 0.0;    // Σ mask
};

MaskedLossSum masked_loss_sum(const float* loss, const float* loss_mask, int64_t rows);

// dloss[rows] = loss_mask · scale; scale is usually 1 / (number of unmasked tokens in the batch).
void masked_loss_grad(const float* loss_mask, int64_t rows, float scale, float* dloss);

}  // namespace mgt::cpu
