#include "eval/lm_windows.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"

namespace mgt {

std::int64_t lm_window_count(std::int64_t token_count, std::int64_t stride) {
  if (stride < 1) throw Error("the window stride must be at least 1");
  const std::int64_t targets = std::max<std::int64_t>(token_count - 1 - stride, 0);
  return std::max<std::int64_t>((targets + stride - 1) / stride + 1, 1);
}

LmWindow lm_window(std::int64_t token_count, std::int64_t seq_length, std::int64_t stride, std::int64_t index) {
  if (stride < 1 || stride > seq_length)
    throw Error("the window stride " + std::to_string(stride) + " must be between 1 and the sequence length " +
                std::to_string(seq_length));
  if (index < 0 || index >= lm_window_count(token_count, stride))
    throw Error("window " + std::to_string(index) + " is out of range");
  LmWindow w;
  w.start = index * stride;
  // Megatron: pad_mask[:-stride] = 0 for every window but the first (a no-op when stride equals
  // seq_length), and padding past the last token is never scored.
  w.first_scored = index == 0 ? 0 : seq_length - stride;
  w.end_scored = std::min(seq_length, token_count - 1 - w.start);
  return w;
}

ScoringRow lm_window_row(std::span<const TokenId> tokens, std::int64_t seq_length, std::int64_t stride,
                         std::int64_t index) {
  const LmWindow w = lm_window(static_cast<std::int64_t>(tokens.size()), seq_length, stride, index);
  ScoringRow row;
  if (w.end_scored <= w.first_scored) return row;  // nothing to score: an empty row
  row.tokens.assign(tokens.begin() + w.start, tokens.begin() + w.start + w.end_scored);
  row.labels.assign(tokens.begin() + w.start + 1, tokens.begin() + w.start + w.end_scored + 1);
  row.first_scored = w.first_scored;
  return row;
}

}  // namespace mgt
