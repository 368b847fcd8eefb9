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

TEST_CASE("cross entropy steps reduce across vocabulary shards like the unsharded loss",
          "[kernels]") {
  const auto logits = random_floats(kRows * kVocab, 411, -3.0f, 3.0f);
  const std::vector<int64_t> targets = {0, 5, 6, 10, 2, 6};
  const int64_t split = 6;  // shard 0 holds ids 0..5, shard 1 ids 6..10
  const int64_t widths[2] = {split, kVocab - split};
  const int64_t starts[2] = {0, split};
  std::vector<std::vector<float>> shards(2);
  for (int rank = 0; rank < 2; ++rank) {
    for (int64_t r = 0; r < kRows; ++r) {
      const auto* row = logits.data() + r * kVocab + starts[rank];
      shards[rank].insert(shards[rank].end(), row, row + widths[rank]);
    }
  }

  // Emulate the three all-reduces between the steps.
  std::vector<float> max(kRows), local(kRows), sum_exp(kRows, 0.0f), target(kRows, 0.0f);
  std::fill(max.begin(), max.end(), -std::numeric_limits<float>::infinity());
  for (int rank = 0; rank < 2; ++rank) {
    cpu::cross_entropy_row_max(shards[rank].data(), kRows, widths[rank], local.data());
    for (int64_t r = 0; r < kRows; ++r) max[r] = std::max(max[r], local[r]);
  }
  for (int rank = 0; rank < 2; ++rank) {
    cpu::cross_entropy_sum_exp(shards[rank].data(), max.data(), kRows, widths[rank], local.data());
    for (int64_t r = 0; r < kRows; ++r) sum_exp[r] += local[r];
    cpu::cross_entropy_target_logit(shards[rank].data(), targets.data(), kRows, widths[rank],
                                    starts[rank], local.data());
    for (int64_t r = 0; r < kRows; ++r) target[r] += local[r];
  }
  std::vector<float> loss(kRows);
  cpu::cross_entropy_loss(max.data(), sum_exp.data(), target.data(), kRows, loss.data());
  CHECK(rel_error(loss, reference_loss(to_double(logits), targets)) < 1e-6);

  // Each shard's backward is the matching slice of the unsharded gradient.
  const auto dloss = random_floats(kRows, 412);
  std::vector<float> full(logits.size()), full_max(kRows), full_sum(kRows), full_loss(kRows);
  cpu::cross_entropy_forward(logits.data(), targets.data(), kRows, kVocab, full_loss.data(),
                             full_max.data(), full_sum.data());
  cpu::cross_entropy_backward(logits.data(), targets.data(), full_max.data(), full_sum.data(),
                              dloss.data(), kRows, kVocab, 0, full.data());
  for (int rank = 0; rank < 2; ++rank) {
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

TEST_CASE("loss mask: masked tokens add nothing to the loss or the gradient", "[kernels]") {
  const auto logits = random_floats(kRows * kVocab, 421, -3.0f, 3.0f);
  const std::vector<int64_t> targets = {1, 2, 3, 4, 5, 6};
  const std::vector<float> mask = {1, 0, 1, 1, 0, 1};
  std::vector<float> loss(kRows), row_max(kRows), sum_exp(kRows);
  cpu::cross_entropy_forward(logits.data(), targets.data(), kRows, kVocab, loss.data(),
                             row_max.data(), sum_exp.data());
  const cpu::MaskedLossSum total = cpu::masked_loss_sum(loss.data(), mask.data(), kRows);
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
