// WikiText-103 perplexity as Megatron's zero-shot evaluation computes it (v0.13
// tasks/zeroshot_gpt/datasets.py _build_wikitext103_dataset, evaluate.py): the whole file is
// detokenized and tokenized at once and read in overlapping windows (eval/lm_windows.hpp); the
// loss is summed over all scored targets. Besides the perplexity per model token, Megatron
// reports an "adjusted" perplexity per word of the original file, comparable across tokenizers.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "eval/detokenizers.hpp"
#include "eval/token_scorer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

// len(text.strip().split(" ")): Megatron's count of the file's words, taken before detokenizing.
std::int64_t count_original_tokens(std::string_view text);

struct WikitextData {
  DetokenizerKind detokenizer = DetokenizerKind::kWikitext;
  std::int64_t original_tokens = 0;
  std::vector<TokenId> tokens;  // of the detokenized text
};

// Reads the file (UTF-8, as bytes: line endings kept), counts its words, detokenizes with the
// detokenizer its path names and tokenizes. Throws mgt::Error for an unreadable file, invalid
// UTF-8 (naming the line), a path that names no detokenizer (mgt::UsageError), and text too
// short to evaluate (fewer than two tokens, or fewer than two words for the token ratio).
WikitextData read_wikitext(const std::string& path, Tokenizer& tokenizer);

struct WikitextSettings {
  std::int64_t seq_length = 0;
  std::int64_t overlapping_eval = 32;  // the window stride, 1…seq_length
  std::int64_t micro_batch_size = 1;
  std::int64_t pad_id = 0;  // the tokenizer's eod, as Megatron pads
};

struct WikitextResult {
  std::int64_t original_tokens = 0;
  std::int64_t detokenized_tokens = 0;  // T
  std::int64_t windows = 0;
  std::int64_t scored_targets = 0;      // T − 1 when every window is scored
  double loss_sum = 0.0;

  double avg_loss() const;      // loss_sum / (T − 1)
  double ppl() const;           // exp(min(20, avg loss)); NaN for a NaN loss
  double token_ratio() const;   // (T − 1) / (original − 1)
  double adjusted_ppl() const;  // exp(min(20, avg loss · token ratio))
};

// on_progress(windows done) after each micro-batch.
WikitextResult evaluate_wikitext(const WikitextData& data, TokenScorer& scorer, const WikitextSettings& settings,
                                 const std::function<void(std::int64_t)>& on_progress = {});

}  // namespace mgt
