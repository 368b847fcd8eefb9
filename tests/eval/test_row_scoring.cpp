#include <catch2/catch.hpp>

#include <vector>

#include "core/error.hpp"
#include "eval/row_scoring.hpp"
#include "eval_testing.hpp"

using namespace mgt;
using eval_testing::RuleScorer;
using Ids = std::vector<std::int64_t>;

TEST_CASE("score_rows pads each micro-batch to its longest row and skips rows with nothing to score",
          "[eval]") {
  const std::vector<ScoringRow> rows = {
      {{10, 11, 12}, {11, 12, 99}, 1},
      {{20, 21, 22, 23, 24}, {21, 22, 23, 24, 25}, 4},
      {{}, {}, 0},          // nothing to score: not run
      {{30, 31}, {31, 32}, 2},  // first_scored = length: nothing either
      {{40, 41}, {41, 43}, 0},
  };
  RuleScorer scorer;
  std::vector<std::int64_t> seen;
  std::vector<std::int64_t> progress;
  std::vector<Ids> labels, predicted;
  std::vector<std::vector<float>> losses;
  score_rows(
      std::ssize(rows), [&](std::int64_t i) { return rows[static_cast<std::size_t>(i)]; }, scorer,
      RowScoringSettings{2, 7, true},
      [&](const ScoredRow& r) {
        seen.push_back(r.index);
        labels.emplace_back(r.labels.begin(), r.labels.end());
        predicted.emplace_back(r.predicted.begin(), r.predicted.end());
        losses.emplace_back(r.losses.begin(), r.losses.end());
      },
      [&](std::int64_t done) { progress.push_back(done); });

  CHECK(seen == Ids{0, 1, 2, 3, 4});
  CHECK(progress == Ids{2, 5});
  REQUIRE(scorer.calls.size() == 2);
  CHECK(scorer.calls[0].batch_size == 2);
  CHECK(scorer.calls[0].seq_length == 5);
  CHECK(scorer.calls[0].tokens == Ids{10, 11, 12, 7, 7, 20, 21, 22, 23, 24});
  CHECK(scorer.calls[0].labels == Ids{11, 12, 99, 7, 7, 21, 22, 23, 24, 25});
  CHECK(scorer.calls[1].batch_size == 1);
  CHECK(scorer.calls[1].tokens == Ids{40, 41});

  CHECK(labels[0] == Ids{12, 99});
  CHECK(predicted[0] == Ids{12, 13});
  CHECK(losses[0] == std::vector<float>{RuleScorer::kHit, RuleScorer::kMiss});
  CHECK(labels[1] == Ids{25});
  CHECK(losses[1] == std::vector<float>{RuleScorer::kHit});
  CHECK(labels[2].empty());
  CHECK(labels[3].empty());
  CHECK(predicted[4] == Ids{41, 42});
  CHECK(losses[4] == std::vector<float>{RuleScorer::kHit, RuleScorer::kMiss});
}

TEST_CASE("score_rows without argmax requests none and passes none on", "[eval]") {
  RuleScorer scorer;
  bool any_predicted = false;
  score_rows(
      3, [](std::int64_t i) { return ScoringRow{{i, i + 1}, {i + 1, i + 2}, 0}; }, scorer, RowScoringSettings{3, 0, false},
      [&](const ScoredRow& r) { any_predicted = any_predicted || !r.predicted.empty(); });
  CHECK_FALSE(any_predicted);
  CHECK(scorer.calls.size() == 1);
}

TEST_CASE("score_rows refuses malformed rows", "[eval]") {
  RuleScorer scorer;
  const auto run = [&](ScoringRow row) {
    score_rows(1, [&](std::int64_t) { return row; }, scorer, RowScoringSettings{1, 0, false}, [](const ScoredRow&) {});
  };
  CHECK_THROWS_AS(run({{1, 2}, {2}, 0}), Error);
  CHECK_THROWS_AS(run({{1, 2}, {2, 3}, 3}), Error);
}

TEST_CASE("score_rows pads every micro-batch to a fixed length when asked", "[eval]") {
  RuleScorer scorer;
  const auto row = [](std::int64_t i) { return ScoringRow{Ids(static_cast<std::size_t>(i + 1), 5), Ids(static_cast<std::size_t>(i + 1), 6), 0}; };
  score_rows(3, row, scorer, RowScoringSettings{2, 9, false, 4}, [](const ScoredRow&) {});
  REQUIRE(scorer.calls.size() == 2);
  CHECK(scorer.calls[0].seq_length == 4);
  CHECK(scorer.calls[0].tokens == Ids{5, 9, 9, 9, 5, 5, 9, 9});
  CHECK(scorer.calls[1].seq_length == 4);
  CHECK_THROWS_AS(score_rows(5, row, scorer, RowScoringSettings{2, 9, false, 4}, [](const ScoredRow&) {}), Error);
}
