// Megatron's sampling rules (spec §9) on hand-made logits: greedy ties, the top-k and top-p
// filters at their edges, the draw's distribution, seeds, and the settings' ranges.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "generate/sampling.hpp"

using namespace mgt;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<bool> kept(const std::vector<float>& filtered) {
  std::vector<bool> out;
  for (float v : filtered) out.push_back(v != -kInf);
  return out;
}

// Logits whose softmax is exactly `probs`.
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

}  // namespace

TEST_CASE("argmax takes the first of equal maxima, as torch.argmax", "[generate]") {
  CHECK(argmax(std::vector<float>{1, 3, 3, 2}) == 1);
  CHECK(argmax(std::vector<float>{-kInf, -5, -kInf}) == 1);
  CHECK(argmax(std::vector<float>{7}) == 0);
}

TEST_CASE("top-k keeps the k largest and everything tied with the k-th", "[generate]") {
  std::vector<float> x = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  keep_top_k(x, 2);
  CHECK(kept(x) == std::vector<bool>{false, true, false, true, false});
  x = {0.5f, 2.0f, 1.0f, 1.0f, 3.0f};
  keep_top_k(x, 2);  // the 2nd largest is 2.0
  CHECK(kept(x) == std::vector<bool>{false, true, false, false, true});
  x = {0.5f, 2.0f, 1.0f, 1.0f, 3.0f};
  keep_top_k(x, 3);  // the 3rd largest is 1.0, tied twice: both stay
  CHECK(kept(x) == std::vector<bool>{false, true, true, true, true});
  x = {0.5f, 2.0f};
  keep_top_k(x, 2);
  CHECK(kept(x) == std::vector<bool>{true, true});
  CHECK_THROWS(keep_top_k(x, 3));
  CHECK_THROWS(keep_top_k(x, 0));
}

TEST_CASE("top-p keeps the token that crosses p and always the most likely one", "[generate]") {
  // Sorted probabilities 0.5, 0.3, 0.2 (given out of order).
  std::vector<float> x = logits_of({0.2, 0.5, 0.3});
  keep_top_p(x, 0.6);  // cumulative 0.5, 0.8, 1.0 > 0.6 → F T T, shifted → F F T
  CHECK(kept(x) == std::vector<bool>{false, true, true});
  x = logits_of({0.2, 0.5, 0.3});
  keep_top_p(x, 0.45);  // the first crosses 0.45 and is kept
  CHECK(kept(x) == std::vector<bool>{false, true, false});
  x = logits_of({0.2, 0.5, 0.3});
  keep_top_p(x, 1e-9);
  CHECK(kept(x) == std::vector<bool>{false, true, false});
  x = logits_of({0.2, 0.5, 0.3});
  keep_top_p(x, 0.85);
  CHECK(kept(x) == std::vector<bool>{true, true, true});
  x = logits_of({0.25, 0.25, 0.25, 0.25});
  keep_top_p(x, 1.0);
  CHECK(kept(x) == std::vector<bool>{true, true, true, true});
  x = logits_of({0.25, 0.25, 0.25, 0.25});
  keep_top_p(x, 0.3);  // ties: the lower index comes first
  CHECK(kept(x) == std::vector<bool>{true, true, false, false});
  CHECK_THROWS(keep_top_p(x, 0.0));
  CHECK_THROWS(keep_top_p(x, 1.5));
}

TEST_CASE("sampling with top_k 1 is greedy whatever the temperature", "[generate]") {
  SampleRng rng(1, 0);
  SamplingParams p;
  p.top_k = 1;
  p.temperature = 50.0;
  for (int i = 0; i < 20; ++i) {
    std::vector<float> x = {0.1f, 0.3f, 0.2f};
    CHECK(sample_token(x, p, rng) == 1);
  }
}

TEST_CASE("sampling draws tokens with their softmax probabilities", "[generate]") {
  const std::vector<double> probs = {0.1, 0.6, 0.05, 0.25};
  SamplingParams p;
  p.top_k = 0;
  SampleRng rng(42, 3);
  std::vector<int> counts(probs.size());
  const int draws = 40000;
  for (int i = 0; i < draws; ++i) {
    std::vector<float> x = logits_of(probs);
    ++counts[static_cast<size_t>(sample_token(x, p, rng))];
  }
  for (size_t i = 0; i < probs.size(); ++i) {
    const double sd = std::sqrt(probs[i] * (1 - probs[i]) / draws);
    CHECK(std::abs(counts[i] / double(draws) - probs[i]) < 5 * sd);
  }
}

TEST_CASE("temperature sharpens and top-k / top-p exclude tokens from the draw", "[generate]") {
  SampleRng rng(7, 0);
  SamplingParams cold;
  cold.top_k = 0;
  cold.temperature = 0.01;  // 1 nat of difference becomes 100
  SamplingParams topk;
  topk.top_k = 2;
  SamplingParams topp;
  topp.top_k = 0;
  topp.top_p = 0.5;
  for (int i = 0; i < 500; ++i) {
    std::vector<float> a = {0.0f, 1.0f, 0.5f};
    CHECK(sample_token(a, cold, rng) == 1);
    std::vector<float> b = logits_of({0.4, 0.35, 0.25});
    CHECK(sample_token(b, topk, rng) != 2);
    std::vector<float> c = logits_of({0.4, 0.35, 0.25});
    CHECK(sample_token(c, topp, rng) != 2);  // cumulative 0.4 < 0.5, so 0.35 is the last kept
  }
}

TEST_CASE("a seed and stream fix the random numbers, streams differ", "[generate]") {
  SampleRng a(1234, 5), b(1234, 5), c(1234, 6), d(1235, 5);
  bool differ_stream = false, differ_seed = false;
  for (int i = 0; i < 8; ++i) {
    const uint64_t x = a.next();
    CHECK(x == b.next());
    differ_stream |= x != c.next();
    differ_seed |= x != d.next();
  }
  CHECK(differ_stream);
  CHECK(differ_seed);
  SampleRng u(9, 9);
  for (int i = 0; i < 1000; ++i) {
    const double v = u.uniform();
    CHECK((v >= 0.0 && v < 1.0));
  }
}

TEST_CASE("sampling settings outside Megatron's ranges are refused naming the flag", "[generate]") {
  auto refused = [](SamplingParams p) {
    try {
      validate_sampling(p, 100);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  SamplingParams p;
  CHECK(refused(p).empty());
  p.temperature = 0.0;
  CHECK_THAT(refused(p), Catch::Contains("--temperature"));
  p = {};
  p.temperature = 101.0;
  CHECK_THAT(refused(p), Catch::Contains("--temperature"));
  p = {};
  p.top_k = 101;
  CHECK_THAT(refused(p), Catch::Contains("--top-k"));
  p = {};
  p.top_p = 0.9;  // with the default top_k 1
  CHECK_THAT(refused(p), Catch::Contains("--top-k 0"));
  p.top_k = 0;
  CHECK(refused(p).empty());
  p.top_p = 1.5;
  CHECK_THAT(refused(p), Catch::Contains("--top-p"));
  p = {};
  p.top_k = 0;
  p.top_p_decay = 0.9;
  CHECK_THAT(refused(p), Catch::Contains("need --top-p"));
}
