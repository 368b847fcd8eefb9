#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "eval/lm_windows.hpp"

using namespace mgt;

namespace {

// Megatron's _LMDataset.__getitem__, transcribed from the spec: the padded window of
// seq_length + 1 tokens and the mask of its seq_length targets.
struct MegatronWindow {
  std::vector<std::int64_t> text;
  std::vector<int> pad_mask;
};

MegatronWindow megatron_window(const std::vector<TokenId>& tokens, std::int64_t seq, std::int64_t stride,
                               std::int64_t idx, std::int64_t pad) {
  MegatronWindow w;
  const std::int64_t start = idx * stride;
  for (std::int64_t i = start; i < std::min<std::int64_t>(start + seq + 1, std::ssize(tokens)); ++i)
    w.text.push_back(tokens[static_cast<std::size_t>(i)]);
  std::vector<int> mask(w.text.size(), 1);
  while (std::ssize(w.text) < seq + 1) {
    w.text.push_back(pad);
    mask.push_back(0);
  }
  w.pad_mask.assign(mask.begin() + 1, mask.end());
  if (stride != seq && idx != 0)
    for (std::int64_t j = 0; j < seq - stride; ++j) w.pad_mask[static_cast<std::size_t>(j)] = 0;
  return w;
}

std::int64_t spec_count(std::int64_t T, std::int64_t stride) {
  const double targets = static_cast<double>(std::max<std::int64_t>(T - 1 - stride, 0));
  return std::max<std::int64_t>(static_cast<std::int64_t>(std::ceil(targets / static_cast<double>(stride))) + 1, 1);
}

}  // namespace

TEST_CASE("lm_window_count follows Megatron's formula", "[eval]") {
  CHECK(lm_window_count(100, 32) == 4);  // ceil(67 / 32) + 1
  CHECK(lm_window_count(33, 32) == 1);
  CHECK(lm_window_count(34, 32) == 2);
  CHECK(lm_window_count(1, 32) == 1);
  CHECK(lm_window_count(0, 1) == 1);
  CHECK(lm_window_count(10, 1) == 9);
  for (std::int64_t T = 0; T < 200; ++T)
    for (std::int64_t stride : {1, 2, 3, 7, 32}) CHECK(lm_window_count(T, stride) == spec_count(T, stride));
  CHECK_THROWS_AS(lm_window_count(10, 0), Error);
}

TEST_CASE("lm windows score what Megatron's padded windows score, unpadded", "[eval]") {
  for (std::int64_t T = 2; T < 40; ++T) {
    std::vector<TokenId> tokens;
    for (std::int64_t i = 0; i < T; ++i) tokens.push_back(static_cast<TokenId>(100 + i));
    for (std::int64_t seq : {1, 3, 8}) {
      for (std::int64_t stride = 1; stride <= seq; ++stride) {
        std::vector<int> times_scored(static_cast<std::size_t>(T), 0);
        for (std::int64_t idx = 0; idx < lm_window_count(T, stride); ++idx) {
          const MegatronWindow m = megatron_window(tokens, seq, stride, idx, 7);
          const ScoringRow row = lm_window_row(tokens, seq, stride, idx);
          INFO("T " << T << " seq " << seq << " stride " << stride << " window " << idx);
          // The row is a prefix of Megatron's input and labels, and ends at the last scored target.
          REQUIRE(std::ssize(row.tokens) <= seq);
          for (std::size_t j = 0; j < row.tokens.size(); ++j) {
            CHECK(row.tokens[j] == m.text[j]);
            CHECK(row.labels[j] == m.text[j + 1]);
          }
          for (std::int64_t j = 0; j < seq; ++j) {
            const bool ours = j >= row.first_scored && j < std::ssize(row.tokens);
            CHECK(ours == (m.pad_mask[static_cast<std::size_t>(j)] == 1));
            if (ours) ++times_scored[static_cast<std::size_t>(idx * stride + j + 1)];
          }
        }
        // Every token but the first is a scored target exactly once.
        CHECK(times_scored[0] == 0);
        for (std::int64_t k = 1; k < T; ++k) CHECK(times_scored[static_cast<std::size_t>(k)] == 1);
      }
    }
  }
}

TEST_CASE("lm windows by hand: 10 tokens, seq 4, stride 2", "[eval]") {
  // 5 windows: starts 0, 2, 4, 6, 8; the first scores targets 1-4, then 5-6, 7-8, 9, nothing.
  const LmWindow w0 = lm_window(10, 4, 2, 0);
  CHECK((w0.start == 0 && w0.first_scored == 0 && w0.end_scored == 4));
  const LmWindow w1 = lm_window(10, 4, 2, 1);
  CHECK((w1.start == 2 && w1.first_scored == 2 && w1.end_scored == 4));
  const LmWindow w3 = lm_window(10, 4, 2, 3);
  CHECK((w3.start == 6 && w3.first_scored == 2 && w3.end_scored == 3));
  const LmWindow w4 = lm_window(10, 4, 2, 4);
  CHECK(w4.end_scored <= w4.first_scored);
  const std::vector<TokenId> tokens = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const ScoringRow r3 = lm_window_row(tokens, 4, 2, 3);
  CHECK(r3.tokens == std::vector<std::int64_t>{6, 7, 8});
  CHECK(r3.labels == std::vector<std::int64_t>{7, 8, 9});
  CHECK(r3.first_scored == 2);
  CHECK(lm_window_row(tokens, 4, 2, 4).tokens.empty());
}

TEST_CASE("lm windows refuse a stride larger than the sequence, and windows out of range", "[eval]") {
  CHECK_THROWS_AS(lm_window(100, 4, 5, 0), Error);
  CHECK_THROWS_AS(lm_window(100, 4, 0, 0), Error);
  CHECK_THROWS_AS(lm_window(10, 4, 2, 5), Error);
}
