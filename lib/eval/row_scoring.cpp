#include "eval/row_scoring.hpp"

#include <algorithm>
#include <cstddef>
#include <string>

#include "core/error.hpp"

namespace mgt {

namespace {

bool has_scored_positions(const ScoringRow& row) {
  return row.first_scored < static_cast<std::int64_t>(row.tokens.size());
}

// Scores the pending rows that have something to score in one call, then reports every pending
// row in order.
void flush(std::int64_t first_index, std::vector<ScoringRow>& pending, TokenScorer& scorer,
           const RowScoringSettings& settings, const std::function<void(const ScoredRow&)>& on_row) {
  std::int64_t batch = 0;
  std::int64_t length = 0;
  for (const ScoringRow& row : pending)
    if (has_scored_positions(row)) {
      ++batch;
      length = std::max<std::int64_t>(length, static_cast<std::int64_t>(row.tokens.size()));
    }

  if (settings.padded_length > 0) length = std::max(length, settings.padded_length);
  TokenScores scores;
  if (batch > 0) {
    std::vector<std::int64_t> tokens(static_cast<std::size_t>(batch * length), settings.pad_id);
    std::vector<std::int64_t> labels(tokens.size(), settings.pad_id);
    std::vector<float> scored(tokens.size(), 0.0f);
    std::int64_t r = 0;
    for (const ScoringRow& row : pending) {
      if (!has_scored_positions(row)) continue;
      std::copy(row.tokens.begin(), row.tokens.end(), tokens.begin() + r * length);
      std::copy(row.labels.begin(), row.labels.end(), labels.begin() + r * length);
      std::fill(scored.begin() + r * length + row.first_scored, scored.begin() + r * length + std::ssize(row.tokens),
                1.0f);
      ++r;
    }
    scores = scorer.score({batch, length, tokens, labels, settings.want_argmax, scored});
    const auto expected = static_cast<std::size_t>(batch * length);
    if (scores.losses.size() != expected || (settings.want_argmax && scores.argmax.size() != expected))
      throw Error("the scorer returned " + std::to_string(scores.losses.size()) + " losses for " +
                  std::to_string(expected) + " positions");
  }

  std::int64_t r = 0;
  for (std::size_t i = 0; i < pending.size(); ++i) {
    const ScoringRow& row = pending[i];
    ScoredRow scored;
    scored.index = first_index + static_cast<std::int64_t>(i);
    if (has_scored_positions(row)) {
      const auto offset = static_cast<std::size_t>(r * length + row.first_scored);
      const auto count = row.tokens.size() - static_cast<std::size_t>(row.first_scored);
      scored.labels = std::span<const std::int64_t>(row.labels).subspan(static_cast<std::size_t>(row.first_scored));
      scored.losses = std::span<const float>(scores.losses).subspan(offset, count);
      if (settings.want_argmax) scored.predicted = std::span<const std::int64_t>(scores.argmax).subspan(offset, count);
      ++r;
    }
    on_row(scored);
  }
  pending.clear();
}

}  // namespace

void score_rows(std::int64_t row_count, const std::function<ScoringRow(std::int64_t)>& make_row,
                TokenScorer& scorer, const RowScoringSettings& settings,
                const std::function<void(const ScoredRow&)>& on_row,
                const std::function<void(std::int64_t)>& on_progress) {
  if (settings.micro_batch_size < 1) throw Error("the micro-batch size must be at least 1");
  std::vector<ScoringRow> pending;
  std::int64_t first_pending = 0;
  std::int64_t runnable = 0;  // pending rows with scored positions
  for (std::int64_t i = 0; i < row_count; ++i) {
    ScoringRow row = make_row(i);
    if (row.tokens.size() != row.labels.size() || row.first_scored < 0 ||
        row.first_scored > static_cast<std::int64_t>(row.tokens.size()))
      throw Error("row " + std::to_string(i) + " has " + std::to_string(row.tokens.size()) + " tokens, " +
                  std::to_string(row.labels.size()) + " labels, first scored position " +
                  std::to_string(row.first_scored));
    if (settings.padded_length > 0 && std::ssize(row.tokens) > settings.padded_length)
      throw Error("row " + std::to_string(i) + " has " + std::to_string(row.tokens.size()) +
                  " positions, more than the padded length " + std::to_string(settings.padded_length));
    if (has_scored_positions(row)) ++runnable;
    pending.push_back(std::move(row));
    if (runnable == settings.micro_batch_size) {
      flush(first_pending, pending, scorer, settings, on_row);
      first_pending = i + 1;
      runnable = 0;
      if (on_progress) on_progress(i + 1);
    }
  }
  if (!pending.empty()) {
    flush(first_pending, pending, scorer, settings, on_row);
    if (on_progress) on_progress(row_count);
  }
}

}  // namespace mgt
