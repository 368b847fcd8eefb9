#include "generate/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/json_text.hpp"

namespace mgt {

namespace {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

}  // namespace

void validate_sampling(const SamplingParams& p, int64_t vocab_size) {
  if (!(p.temperature > 0.0 && p.temperature <= 100.0))
    throw UsageError("--temperature must be in (0, 100], got " + python_float_repr(p.temperature));
  if (p.top_k < 0 || p.top_k > vocab_size)
    throw UsageError("--top-k must be in [0, " + std::to_string(vocab_size) + "] (0: no limit, 1: greedy), got " +
                     std::to_string(p.top_k));
  if (!(p.top_p >= 0.0 && p.top_p <= 1.0)) throw UsageError("--top-p must be in [0, 1], got " + python_float_repr(p.top_p));
  if (p.top_p > 0.0 && p.top_k > 0)
    throw UsageError("--top-p " + python_float_repr(p.top_p) + " cannot be combined with --top-k " + std::to_string(p.top_k) +
                     " (pass --top-k 0 to sample with top-p)");
  if (!(p.top_p_decay >= 0.0 && p.top_p_decay <= 1.0))
    throw UsageError("--top-p-decay must be in [0, 1], got " + python_float_repr(p.top_p_decay));
  if (!(p.top_p_bound >= 0.0 && p.top_p_bound <= 1.0))
    throw UsageError("--top-p-bound must be in [0, 1], got " + python_float_repr(p.top_p_bound));
  if ((p.top_p_decay > 0.0 || p.top_p_bound > 0.0) && p.top_p == 0.0)
    throw UsageError("--top-p-decay and --top-p-bound need --top-p");
}

int64_t argmax(std::span<const float> logits) {
  if (logits.empty()) throw Error("argmax of an empty row");
  return std::max_element(logits.begin(), logits.end()) - logits.begin();  // first of equal maxima
}

void keep_top_k(std::span<float> logits, int64_t k) {
  const auto n = static_cast<int64_t>(logits.size());
  if (k < 1 || k > n) throw Error("top-k filter: k = " + std::to_string(k) + " outside [1, " + std::to_string(n) + "]");
  std::vector<float> sorted(logits.begin(), logits.end());
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<float>());
  const float kth = sorted[static_cast<size_t>(k - 1)];
  for (float& v : logits)
    if (v < kth) v = kMinusInfinity;
}

void keep_top_p(std::span<float> logits, double p) {
  if (!(p > 0.0 && p <= 1.0)) throw Error("top-p filter: p = " + std::to_string(p) + " outside (0, 1]");
  if (p == 1.0) return;  // everything; a rounded cumulative sum above 1 must not drop the tail
  std::vector<int64_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  // Descending by value, ties by index, so the result does not depend on the sort algorithm.
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  const double top = logits[static_cast<size_t>(order[0])];
  double total = 0.0;
  for (float v : logits) total += std::exp(static_cast<double>(v) - top);
  // Megatron masks every sorted position whose cumulative probability exceeds p, shifted right
  // by one: a token is dropped when the tokens before it already exceed p.
  double before = 0.0;
  for (int64_t r : order) {
    const auto i = static_cast<size_t>(r);
    const double prob = std::exp(static_cast<double>(logits[i]) - top) / total;
    if (before > p) logits[i] = kMinusInfinity;
    before += prob;
  }
}

int64_t sample_token(std::span<float> logits, const SamplingParams& params, SampleRng& rng) {
  if (params.greedy()) return argmax(logits);
  if (params.temperature != 1.0) {
    const auto t = static_cast<float>(params.temperature);
    for (float& v : logits) v /= t;
  }
  if (params.top_k > 1) keep_top_k(logits, params.top_k);
  else if (params.top_p > 0.0) keep_top_p(logits, params.top_p);

  const float top = logits[static_cast<size_t>(argmax(logits))];
  double total = 0.0;
  for (float v : logits) total += std::exp(static_cast<double>(v) - top);
  const double u = rng.uniform() * total;
  double cumulative = 0.0;
  int64_t last_possible = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double w = std::exp(static_cast<double>(logits[i]) - top);
    if (w == 0.0) continue;
    cumulative += w;
    last_possible = static_cast<int64_t>(i);
    if (u < cumulative) return last_possible;
  }
  return last_possible;  // rounding left u at the very end of the range
}

}  // namespace mgt
