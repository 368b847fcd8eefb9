#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernel_testing.hpp"
#include "kernels/cpu/cross_entropy.hpp"

using namespace mgt;
using namespace mgt::kernel_testing;

namespace {

constexpr int64_t kRows = 6;
constexpr int64_t kVocab = 11;

// log Σ exp(logits) − logit[target], computed with the max shift in fp64.
std::vector<double> reference_loss(const std::vector<double>& logits,
                                   const std::vector<int64_t>& targets) {
  std::vector<double> loss(kRows);
  for (int64_t r = 0; r < kRows; ++r) {
    const double* row = logits.data() + r * kVocab;
    const double max = *std::max_element(row, row + kVocab);
    double sum = 0.0;
    for (int64_t i = 0; i < kVocab; ++i) sum += std::exp(row[i] - max);
    loss[r] = max + std::log(sum) - row[targets[r]];
  }
  return loss;
}

}  // namespace

TEST_CASE("cross entropy forward and backward match fp64", "[kernels]") {
  auto logits = random_floats(kRows * kVocab, 401, -4.0f, 4.0f);
  // A large common offset would overflow exp without the max shift.
  for (int64_t i = 0; i < kVocab; ++i) logits[kVocab + i] += 120.0f;
  const std::vector<int64_t> targets = {3, 0, 10, 7, 7, 5};
  const auto dloss = random_floats(kRows, 402);
  const auto ld = to_double(logits), dlossd = to_double(dloss);

  std::vector<float> loss(kRows), row_max(kRows), sum_exp(kRows);
  cpu::cross_entropy_forward(logits.data(), targets.data(), kRows, kVocab, loss.data(),
                             row_max.data(), sum_exp.data());
  const auto want = reference_loss(ld, targets);
  CHECK(rel_error(loss, want) < 1e-6);
  CHECK(max_rel_error(loss, want) < 1e-6);

  std::vector<float> dlogits(logits.size());
  cpu::cross_entropy_backward(logits.data(), targets.data(), row_max.data(), sum_exp.data(),
                              dloss.data(), kRows, kVocab, 0, dlogits.data());
  const auto want_d = numeric_gradient(
      [&](const std::vector<double>& x) { return dot(reference_loss(x, targets), dlossd); }, ld);
  CHECK(rel_error(dlogits, want_d) < 1e-5);
  CHECK(max_rel_error(dlogits, want_d) < 1e-5);
}

TEST_CASE("cross entropy over vocabulary shards: statistics combined like the unsharded loss",
          "[kernels]") {
  auto logits = random_floats(kRows * kVocab, 411, -3.0f, 3.0f);
  // Rows whose maxima sit in different shards, one far above the others' (a shard's sum is
  // relative to its own maximum until the combination rescales it).
  for (int64_t i = 0; i < 4; ++i) logits[kVocab + i] += 40.0f;
  for (int64_t i = 8; i < kVocab; ++i) logits[3 * kVocab + i] += 25.0f;
  const std::vector<int64_t> targets = {0, 5, 6, 10, 2, 6};
  const auto want = reference_loss(to_double(logits), targets);
  const auto dloss = random_floats(kRows, 412);
  std::vector<float> full(logits.size()), full_max(kRows), full_sum(kRows), full_loss(kRows);
  cpu::cross_entropy_forward(logits.data(), targets.data(), kRows, kVocab, full_loss.data(),
                             full_max.data(), full_sum.data());
  cpu::cross_entropy_backward(logits.data(), targets.data(), full_max.data(), full_sum.data(),
                              dloss.data(), kRows, kVocab, 0, full.data());

  for (const std::vector<int64_t>& widths : {std::vector<int64_t>{6, 5},
                                             std::vector<int64_t>{4, 4, 3}}) {
    const auto ranks = static_cast<int64_t>(widths.size());
    INFO(ranks << " shards");
    // What the all-gather leaves: [ranks, 3, rows].
    std::vector<float> statistics(static_cast<size_t>(ranks * 3 * kRows));
    std::vector<std::vector<float>> shards(widths.size());
    std::vector<int64_t> starts;
    for (int64_t rank = 0, start = 0; rank < ranks; start += widths[rank], ++rank) {
      starts.push_back(start);
      for (int64_t r = 0; r < kRows; ++r) {
        const auto* row = logits.data() + r * kVocab + start;
        shards[rank].insert(shards[rank].end(), row, row + widths[rank]);
      }
      float* own = statistics.data() + rank * 3 * kRows;
      cpu::cross_entropy_shard_statistics(shards[rank].data(), targets.data(), kRows, widths[rank],
                                          start, own, own + kRows, own + 2 * kRows);
    }
    std::vector<float> loss(kRows), max(kRows), sum_exp(kRows);
    cpu::cross_entropy_combine(statistics.data(), ranks, kRows, loss.data(), max.data(),
                               sum_exp.data());
    CHECK(max_rel_error(loss, want) < 1e-6);
    CHECK(max == full_max);
    CHECK(max_rel_error(sum_exp, to_double(full_sum)) < 1e-6);

    // Each shard's backward is the matching slice of the unsharded gradient.
    for (int64_t rank = 0; rank < ranks; ++rank) {
      std::vector<float> d(shards[rank].size());
      cpu::cross_entropy_backward(shards[rank].data(), targets.data(), max.data(), sum_exp.data(),
                                  dloss.data(), kRows, widths[rank], starts[rank], d.data());
      for (int64_t r = 0; r < kRows; ++r) {
        for (int64_t i = 0; i < widths[rank]; ++i) {
          CHECK(d[r * widths[rank] + i] ==
                Approx(full[r * kVocab + starts[rank] + i]).epsilon(1e-5).margin(1e-7));
        }
      }
    }
  }
}

TEST_CASE("loss mask: masked tokens add nothing to the loss or the gradient", "[kernels]") {
  const auto logits = random_floats(kRows * kVocab, 421, -3.0f, 3.0f);
  const std::vector<int64_t> targets = {1, 2, 3, 4, 5, 6};
  const std::vector<float> mask = {1, 0, 1, 1, 0, 1};
  std::vector<float> loss(kRows), row_max(kRows), sum_exp(kRows);
  cpu::cross_entropy_forward(logits.data(), targets.data(), kRows, kVocab, loss.data(),
                             row_max.data(), sum_exp.data());
  const MaskedLossSum total = cpu::masked_loss_sum(loss.data(), mask.data(), kRows);
  CHECK(total.tokens == 4.0);
  const double want = static_cast<double>(loss[0]) + loss[2] + loss[3] + loss[5];
  CHECK(total.loss_sum == Approx(want).epsilon(1e-12));

  // Gradient of the masked mean: dloss = mask / tokens, so masked rows get zero dlogits.
  std::vector<float> dloss(kRows), dlogits(logits.size());
  cpu::masked_loss_grad(mask.data(), kRows, static_cast<float>(1.0 / total.tokens), dloss.data());
  cpu::cross_entropy_backward(logits.data(), targets.data(), row_max.data(), sum_exp.data(),
                              dloss.data(), kRows, kVocab, 0, dlogits.data());
  const auto ld = to_double(logits);
  const auto mean_loss = [&](const std::vector<double>& x) {
    const auto l = reference_loss(x, targets);
    double s = 0.0;
    for (int64_t r = 0; r < kRows; ++r) s += l[r] * mask[r];
    return s / 4.0;
  };
  CHECK(rel_error(dlogits, numeric_gradient(mean_loss, ld)) < 1e-5);
  for (const int64_t r : {1, 4}) {
    for (int64_t i = 0; i < kVocab; ++i) CHECK(dlogits[r * kVocab + i] == 0.0f);
  }
}
