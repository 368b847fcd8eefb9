#include "eval/wikitext_task.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/mapped_file.hpp"
#include "core/utf8.hpp"
#include "eval/lm_windows.hpp"
#include "eval/python_text.hpp"
#include "eval/row_scoring.hpp"

namespace mgt {

std::int64_t count_original_tokens(std::string_view text) {
  return static_cast<std::int64_t>(python_text::count_split_parts(python_text::strip(text), " "));
}

WikitextData read_wikitext(const std::string& path, Tokenizer& tokenizer) {
  const std::optional<DetokenizerKind> kind = detokenizer_for_path(path);
  if (!kind)
    throw UsageError("--valid-data " + path +
                     ": Megatron picks the detokenizer from the file's path, which must contain "
                     "'ptb', 'wiki' or 'lambada'");
  const MappedFile file(path);
  const std::string_view text = file.view();
  if (const std::optional<std::size_t> bad = utf8::find_invalid(text)) {
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(*bad), '\n');
    throw Error(path + ":" + std::to_string(line) + ": invalid UTF-8 at byte " + std::to_string(*bad));
  }
  WikitextData data;
  data.detokenizer = *kind;
  data.original_tokens = count_original_tokens(text);
  data.tokens = tokenizer.tokenize(detokenize(*kind, text));
  if (data.tokens.size() < 2)
    throw Error(path + ": " + std::to_string(data.tokens.size()) +
                " tokens after tokenization; perplexity needs at least two");
  if (data.original_tokens < 2)
    throw Error(path + ": one space-separated word; the token ratio needs at least two");
  return data;
}

double WikitextResult::avg_loss() const { return loss_sum / static_cast<double>(detokenized_tokens - 1); }

namespace {

// Megatron's math.exp(min(20, x)), except that a NaN stays NaN: Python's min(20, nan) is 20, which
// would report a NaN loss as the finite perplexity e^20.
double capped_exp(double x) { return std::isnan(x) ? x : std::exp(std::min(20.0, x)); }

}  // namespace

double WikitextResult::ppl() const { return capped_exp(avg_loss()); }

double WikitextResult::token_ratio() const {
  return static_cast<double>(detokenized_tokens - 1) / static_cast<double>(original_tokens - 1);
}

double WikitextResult::adjusted_ppl() const { return capped_exp(avg_loss() * token_ratio()); }

WikitextResult evaluate_wikitext(const WikitextData& data, TokenScorer& scorer, const WikitextSettings& settings,
                                 const std::function<void(std::int64_t)>& on_progress) {
  WikitextResult result;
  result.original_tokens = data.original_tokens;
  result.detokenized_tokens = static_cast<std::int64_t>(data.tokens.size());
  result.windows = lm_window_count(result.detokenized_tokens, settings.overlapping_eval);
  // Only the text's last windows are shorter than seq_length; padded after their scored targets.
  const RowScoringSettings rows{settings.micro_batch_size, settings.pad_id, false,
                                std::min(settings.seq_length, result.detokenized_tokens - 1)};
  score_rows(
      result.windows,
      [&](std::int64_t i) { return lm_window_row(data.tokens, settings.seq_length, settings.overlapping_eval, i); },
      scorer, rows,
      [&](const ScoredRow& row) {
        for (const float loss : row.losses) result.loss_sum += loss;
        result.scored_targets += static_cast<std::int64_t>(row.losses.size());
      },
      on_progress);
  return result;
}

}  // namespace mgt
