// Runs the rows of a zero-shot task through a TokenScorer, micro_batch_size rows at a time, in
// order, holding one micro-batch at a time (rows are built on demand, scores handed on at once).
//
// A row stops at its last scored position. Megatron pads every sample to seq_length + 1 tokens,
// but attention is causal: what follows a position cannot change the prediction made there, so
// the padding only costs time. Micro-batches are padded to the task's longest row instead (one
// length for all, so that the model keeps its activation buffers rather than reallocating them
// for every micro-batch), and a row with nothing to score (a window past the end of the text) is
// not run at all.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "eval/token_scorer.hpp"

namespace mgt {

struct ScoringRow {
  std::vector<std::int64_t> tokens;  // model input, position 0…n−1
  std::vector<std::int64_t> labels;  // n labels
  std::int64_t first_scored = 0;     // positions first_scored…n−1 count; n: none
};

// What a task learns about one row: its scored positions only.
struct ScoredRow {
  std::int64_t index = 0;
  std::span<const std::int64_t> labels;     // the labels of the scored positions
  std::span<const float> losses;            // their cross-entropy
  std::span<const std::int64_t> predicted;  // the argmax there (empty unless requested)
};

struct RowScoringSettings {
  std::int64_t micro_batch_size = 1;
  std::int64_t pad_id = 0;   // fills short rows (Megatron pads with eod)
  bool want_argmax = false;
  // Every micro-batch is padded to this many positions; 0: to its own longest row. A longer row
  // is an error.
  std::int64_t padded_length = 0;
};

// Calls on_row for rows 0…row_count−1 in order, and on_progress(rows done) after each
// micro-batch. Throws mgt::Error for a row with mismatched tokens and labels.
void score_rows(std::int64_t row_count, const std::function<ScoringRow(std::int64_t)>& make_row,
                TokenScorer& scorer, const RowScoringSettings& settings,
                const std::function<void(const ScoredRow&)>& on_row,
                const std::function<void(std::int64_t)>& on_progress = {});

}  // namespace mgt
