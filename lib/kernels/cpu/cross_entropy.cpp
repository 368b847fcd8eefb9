#include "kernels/cpu/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/require.hpp"

namespace mgt::cpu {
namespace {

void check(int64_t rows, int64_t vocab, const char* name) {
  require_nonnegative(rows, name, "rows");
  require_nonnegative(vocab, name, "vocab");
}

void cross_entropy_row_max(const float* logits, int64_t rows, int64_t vocab, float* row_max) {
  check(rows, vocab, "cross_entropy_row_max");
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * vocab;
    // An empty local slice contributes −inf, the identity of the max all-reduce.
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < vocab; ++i) max = std::max(max, row[i]);
    row_max[r] = max;
  }
}

void cross_entropy_sum_exp(const float* logits, const float* row_max, int64_t rows, int64_t vocab,
                           float* sum_exp) {
  check(rows, vocab, "cross_entropy_sum_exp");
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * vocab;
    double sum = 0.0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::exp(row[i] - row_max[r]);
    sum_exp[r] = static_cast<float>(sum);
  }
}

void cross_entropy_target_logit(const float* logits, const int64_t* targets, int64_t rows,
                                int64_t vocab, int64_t vocab_start, float* target_logit) {
  check(rows, vocab, "cross_entropy_target_logit");
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t local = targets[r] - vocab_start;
    target_logit[r] = local >= 0 && local < vocab ? logits[r * vocab + local] : 0.0f;
  }
}

void cross_entropy_loss(const float* row_max, const float* sum_exp, const float* target_logit,
                        int64_t rows, float* loss) {
  require_nonnegative(rows, "cross_entropy_loss", "rows");
  for (int64_t r = 0; r < rows; ++r) {
    // (max − target) first: both are large and close, log(sum_exp) is small.
    loss[r] = (row_max[r] - target_logit[r]) + std::log(sum_exp[r]);
  }
}

}  // namespace

void cross_entropy_shard_statistics(const float* logits, const int64_t* targets, int64_t rows,
                                    int64_t vocab, int64_t vocab_start, float* row_max,
                                    float* sum_exp, float* target_logit) {
  cross_entropy_row_max(logits, rows, vocab, row_max);
  cross_entropy_sum_exp(logits, row_max, rows, vocab, sum_exp);
  cross_entropy_target_logit(logits, targets, rows, vocab, vocab_start, target_logit);
}

void cross_entropy_combine(const float* statistics, int64_t ranks, int64_t rows, float* loss,
                           float* row_max, float* sum_exp) {
  require(ranks >= 1, "cross_entropy_combine", "ranks must be at least 1");
  require_nonnegative(rows, "cross_entropy_combine", "rows");
  const auto part = [&](int64_t rank, int64_t which, int64_t r) {
    return statistics[(rank * 3 + which) * rows + r];
  };
  for (int64_t r = 0; r < rows; ++r) {
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t k = 0; k < ranks; ++k) max = std::max(max, part(k, 0, r));
    double sum = 0.0;
    float target = 0.0f;
    for (int64_t k = 0; k < ranks; ++k) {
      // A slice's sum is relative to its own maximum; an empty slice (−inf) adds nothing.
      const float slice_max = part(k, 0, r);
      if (slice_max != -std::numeric_limits<float>::infinity()) {
        sum += static_cast<double>(part(k, 1, r)) * std::exp(static_cast<double>(slice_max) - max);
      }
      target += part(k, 2, r);
    }
    row_max[r] = max;
    sum_exp[r] = static_cast<float>(sum);
    loss[r] = (max - target) + std::log(sum_exp[r]);
  }
}

void cross_entropy_forward(const float* logits, const int64_t* targets, int64_t rows,
                           int64_t vocab, float* loss, float* row_max, float* sum_exp) {
  check(rows, vocab, "cross_entropy_forward");
  for (int64_t r = 0; r < rows; ++r) {
    require(targets[r] >= 0 && targets[r] < vocab, "cross_entropy_forward",
            "target id outside the vocabulary");
  }
  cross_entropy_row_max(logits, rows, vocab, row_max);
  cross_entropy_sum_exp(logits, row_max, rows, vocab, sum_exp);
  // The loss buffer holds the target logits until the last step overwrites them in place.
  cross_entropy_target_logit(logits, targets, rows, vocab, 0, loss);
  cross_entropy_loss(row_max, sum_exp, loss, rows, loss);
}

void cross_entropy_backward(const float* logits, const int64_t* targets, const float* row_max,
                            const float* sum_exp, const float* dloss, int64_t rows, int64_t vocab,
                            int64_t vocab_start, float* dlogits) {
  check(rows, vocab, "cross_entropy_backward");
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * vocab;
    float* drow = dlogits + r * vocab;
    const float g = dloss[r];
    const float inv_sum = 1.0f / sum_exp[r];
    for (int64_t i = 0; i < vocab; ++i) drow[i] = std::exp(row[i] - row_max[r]) * inv_sum * g;
    const int64_t local = targets[r] - vocab_start;
    if (local >= 0 && local < vocab) drow[local] -= g;
  }
}

MaskedLossSum masked_loss_sum(const float* loss, const float* loss_mask, int64_t rows) {
  require_nonnegative(rows, "masked_loss_sum", "rows");
  MaskedLossSum total;
  for (int64_t r = 0; r < rows; ++r) {
    total.loss_sum += static_cast<double>(loss[r]) * loss_mask[r];
    total.tokens += loss_mask[r];
  }
  return total;
}

void masked_loss_grad(const float* loss_mask, int64_t rows, float scale, float* dloss) {
  require_nonnegative(rows, "masked_loss_grad", "rows");
  for (int64_t r = 0; r < rows; ++r) dloss[r] = loss_mask[r] * scale;
}

}  // namespace mgt::cpu
