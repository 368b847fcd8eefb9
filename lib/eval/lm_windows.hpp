// The windows of Megatron's perplexity evaluation (v0.13 tasks/zeroshot_gpt/datasets.py
// _LMDataset): the tokenized text is read in windows of seq_length + 1 tokens that start every
// `stride` tokens (--overlapping-eval). The first window scores all its targets; every later one
// only its last `stride`, each predicted with seq_length − stride tokens of context already
// scored, so that every target except the text's first token is scored exactly once.
#pragma once
#include <cstdint>
#include <span>

#include "eval/row_scoring.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

// max(ceil(max(T − 1 − stride, 0) / stride) + 1, 1) for T tokens. Megatron's count may end with
// windows that lie wholly past the text (they score nothing); they are counted all the same.
std::int64_t lm_window_count(std::int64_t token_count, std::int64_t stride);

// Window `index` in target positions: it starts at token `start`; targets first…end−1 of it are
// scored (target j of the window is token start + j + 1, predicted from tokens start…start + j).
struct LmWindow {
  std::int64_t start = 0;
  std::int64_t first_scored = 0;
  std::int64_t end_scored = 0;  // ≤ first_scored: nothing scored
};

// Requires 1 ≤ stride ≤ seq_length (a larger stride would leave targets unscored) and
// 0 ≤ index < lm_window_count; throws mgt::Error otherwise.
LmWindow lm_window(std::int64_t token_count, std::int64_t seq_length, std::int64_t stride, std::int64_t index);

// The window as a row to score, ending at its last scored target (so never padded).
ScoringRow lm_window_row(std::span<const TokenId> tokens, std::int64_t seq_length, std::int64_t stride,
                         std::int64_t index);

}  // namespace mgt
