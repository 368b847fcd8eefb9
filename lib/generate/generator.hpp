// Completing a batch of prompts with a key/value-cached model, in the order of Megatron's
// generate_tokens_probs_and_return_on_first_stage: the prompts are right-padded into one
// [batch, longest prompt + new tokens] array, the part every prompt has (up to the shortest
// prompt) is run through the model in one pass, then one position at a time; a sequence whose
// prompt is not finished yet keeps its prompt token at that position, the others take the
// sampled one. Each position costs one token's forward plus attention over the cache.
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "generate/sampling.hpp"
#include "model/kv_cache.hpp"
#include "model/gpt_model.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

struct GenerationSettings {
  int64_t max_new_tokens = 30;  // Megatron's tokens_to_generate
  SamplingParams sampling;
  uint64_t seed = 1234;
  bool return_log_probs = false;
  bool add_bos = false;  // Megatron's add_BOS: the prompt starts with the end-of-document token
  // A completion ends at the first of these in its text (not included in the text).
  std::vector<std::string> stop_strings;
  bool stop_on_eol = false;         // ends at the first newline
  bool stop_on_double_eol = false;  // ends at the first blank line
  // Megatron's prevent_newline_after_colon: the token of "\n" is never drawn right after the
  // token of ":" (its logit becomes -1e10, as in Megatron's generation loop).
  bool prevent_newline_after_colon = false;
  // Also the log-probability of each prompt token after the first, given the tokens before it
  // (Megatron's server returns these ahead of the generated tokens' own).
  bool return_prompt_log_probs = false;
};

enum class FinishReason { kEndOfDocument, kStop, kLength };
std::string_view to_string(FinishReason reason);  // "eod" | "stop" | "length"

struct Completion {
  std::vector<TokenId> prompt_tokens;
  std::vector<TokenId> tokens;  // generated, the end-of-document token excluded
  std::vector<float> log_probs;  // log-softmax of each generated token, when asked for
  std::string text;              // detokenized generated tokens, cut before a stop string
  FinishReason finish_reason = FinishReason::kLength;
  // With return_prompt_log_probs: one per prompt token after the first.
  std::vector<float> prompt_log_probs;
  // With return_log_probs, when the end-of-document token ended the completion: its
  // log-probability (it is not among `tokens`); NaN otherwise.
  float end_of_document_log_prob = std::numeric_limits<float>::quiet_NaN();
};

// One sequence of a batch whose rows each carry their own settings, so that requests with
// different sampling parameters share one batch.
struct GenerationRow {
  std::vector<TokenId> prompt_tokens;  // non-empty, shorter than the model's positions
  const GenerationSettings* settings = nullptr;  // sampling and stopping; its seed is not used
  uint64_t seed = 0;                             // the row draws from SampleRng(seed, stream)
  uint64_t stream = 0;
};

// A prompt generation cannot start from (a token the tokenizer or the model refuses, empty, or
// too long); what() names it ("prompt N ...", N counting from first_index + 1), and `index` is its
// place among the prompts given to Generator::generate, so that a caller can say where it came
// from.
class PromptError : public Error {
public:
  PromptError(size_t index, const std::string& message) : Error(message), index(index) {}
  size_t index;
};

// Throws mgt::UsageError for sampling settings outside their ranges or combined as Megatron
// refuses them, and for a negative number of tokens to generate.
void validate_generation_settings(const GenerationSettings& settings, int64_t vocab_size);

class Generator {
public:
  // Throws mgt::UsageError for invalid sampling settings. A sequence (prompt and generated
  // tokens) has at most max_sequence_length positions; 0 or more than the model's
  // max_position_embeddings: those.
  Generator(GptModel& model, Tokenizer& tokenizer, GenerationSettings settings, int64_t max_sequence_length = 0);

  const GenerationSettings& settings() const { return settings_; }
  // The most positions one sequence can have (prompt and generated tokens).
  int64_t max_sequence_length() const { return max_sequence_length_; }

  // Completes `prompts`; prompt i draws from random stream first_index + i, so a completion is
  // the same whichever prompts share its batch. Throws PromptError naming the prompt (by
  // first_index + i) when it cannot be tokenized, holds a token outside the model's vocabulary,
  // is empty without add_bos or leaves no room for new tokens.
  std::vector<Completion> generate(std::span<const std::string> prompts, int64_t first_index = 0);

  // The prompt's ids as generation sees them: the end-of-document token first with add_bos.
  // Throws mgt::Error when an id is outside the model's (padded) vocabulary: a tokenizer that
  // reads ids from the text (NullTokenizer) takes any integer.
  std::vector<TokenId> prompt_tokens(const std::string& prompt, bool add_bos) const;
  // Completes rows with per-row settings (validated by the caller: validate_sampling, a
  // non-negative max_new_tokens). Throws mgt::Error naming the row (from 1) whose prompt is
  // empty or leaves no room for new tokens. A row's completion does not depend on the others.
  std::vector<Completion> generate_rows(std::span<const GenerationRow> rows);

private:
  // log_softmax of each prompt token after the first, from one forward pass over the prompt.
  std::vector<float> prompt_log_probs(std::span<const TokenId> prompt) const;

  // A cache for `batch` sequences of `capacity` positions: the last one, emptied, when it has that
  // shape (the model's recorded decode step belongs to one cache), else a new one.
  KvCache& cache_for(int64_t batch, int64_t capacity);

  GptModel* model_;
  Tokenizer* tokenizer_;
  std::unique_ptr<KvCache> cache_;
  GenerationSettings settings_;
  int64_t max_sequence_length_ = 0;
};

}  // namespace mgt
