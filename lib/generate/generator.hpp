// Completing a batch of prompts with a key/value-cached model, in the order of Megatron's
// generate_tokens_probs_and_return_on_first_stage: the prompts are right-padded into one
// [batch, longest prompt + new tokens] array, the part every prompt has (up to the shortest
// prompt) is run through the model in one pass, then one position at a time; a sequence whose
// prompt is not finished yet keeps its prompt token at that position, the others take the
// sampled one. Each position costs one token's forward plus attention over the cache.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "generate/sampling.hpp"
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
};

enum class FinishReason { kEndOfDocument, kStop, kLength };
std::string_view to_string(FinishReason reason);  // "eod" | "stop" | "length"

struct Completion {
  std::vector<TokenId> prompt_tokens;
  std::vector<TokenId> tokens;  // generated, the end-of-document token excluded
  std::vector<float> log_probs;  // log-softmax of each generated token, when asked for
  std::string text;              // detokenized generated tokens, cut before a stop string
  FinishReason finish_reason = FinishReason::kLength;
};

class Generator {
public:
  // Throws mgt::UsageError for invalid sampling settings.
  Generator(GptModel& model, Tokenizer& tokenizer, GenerationSettings settings);

  const GenerationSettings& settings() const { return settings_; }
  // The most positions one sequence can have (prompt and generated tokens).
  int64_t max_sequence_length() const;

  // Completes `prompts`; prompt i draws from random stream first_index + i, so a completion is
  // the same whichever prompts share its batch. Throws mgt::Error naming the prompt (by
  // first_index + i) when it is empty without add_bos or leaves no room for new tokens.
  std::vector<Completion> generate(std::span<const std::string> prompts, int64_t first_index = 0);

private:
  GptModel* model_;
  Tokenizer* tokenizer_;
  GenerationSettings settings_;
};

}  // namespace mgt
