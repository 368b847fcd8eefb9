// LAMBADA cloze accuracy as Megatron's zero-shot evaluation measures it (v0.13
// tasks/zeroshot_gpt/datasets.py _LambadaDataset, evaluate.py forward_step): an example is
// right when the model's argmax is the expected token at every target position.
//
// Without --strict-lambada the whole text is tokenized and its last token is the target; with
// it, the target is the last whitespace-separated word, tokenized on its own with a leading
// space (possibly several tokens), and the context is the text before it, stripped.
//
// Megatron fails on examples longer than seq_length + 1 tokens; here they keep their last
// seq_length + 1 tokens (the start of the context is dropped) and are counted as truncated.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "eval/row_scoring.hpp"
#include "eval/token_scorer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

struct LambadaExample {
  std::int64_t line = 0;  // in the data file, from 1
  std::vector<TokenId> context;
  std::vector<TokenId> target;
};

// _LambadaDataset.get_tokens. Throws mgt::Error (without a location) when the text has no word
// (strict) or no token (otherwise), and when no context precedes the target (a one-word text):
// nothing would predict the target, and Megatron would count the example as right.
LambadaExample lambada_example(std::string_view text, Tokenizer& tokenizer, bool strict);

// The examples of a JSON-lines file with a string "text" per line, lines split as Python's
// readlines() splits them. Throws mgt::Error "PATH:LINE: why" for a malformed line, and for a
// file without lines.
std::vector<LambadaExample> read_lambada_examples(const std::string& path, Tokenizer& tokenizer, bool strict);

struct LambadaRow {
  ScoringRow row;
  bool truncated = false;
};

// The example as a row to score: context then target, its last seq_length + 1 tokens, scored at
// the positions that predict target tokens. Throws mgt::Error when the target alone needs more
// than seq_length tokens (no context would be left to predict it from).
LambadaRow lambada_row(const LambadaExample& example, std::int64_t seq_length);

struct LambadaSettings {
  std::int64_t seq_length = 0;
  std::int64_t micro_batch_size = 1;
  std::int64_t pad_id = 0;  // the tokenizer's eod, as Megatron pads
  std::string source;       // the data file, for error messages
};

struct LambadaResult {
  std::int64_t examples = 0;
  std::int64_t correct = 0;
  std::int64_t truncated = 0;      // examples that lost the start of their context
  std::int64_t target_tokens = 0;  // scored target positions
  double target_loss_sum = 0.0;    // cross-entropy summed over them

  double accuracy() const;           // correct / examples, Megatron's metric
  double target_avg_loss() const;    // target_loss_sum / target_tokens
  double target_perplexity() const;  // exp(target_avg_loss)
};

// on_progress(examples done) after each micro-batch.
LambadaResult evaluate_lambada(std::span<const LambadaExample> examples, TokenScorer& scorer,
                               const LambadaSettings& settings,
                               const std::function<void(std::int64_t)>& on_progress = {});

}  // namespace mgt
