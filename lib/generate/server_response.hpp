// The answers of mgt-generate's server, as Megatron's MegatronGenerate.put returns them
// (megatron/core/inference/text_generation_server/text_generation_server.py, through
// run_mcore_engine.py): for each prompt the whole sequence — prompt and generated tokens, the
// end-of-document token included when it ended the generation — as `text` (detokenized at once),
// `segments` (each token detokenized alone), `tokens` (the ids), and, when asked for,
// `logprobs`: the log-probability of every token after the first given those before it.
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "generate/generator.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

struct ServerAnswer {
  std::string text;
  std::vector<std::string> segments;
  std::vector<TokenId> tokens;
  std::vector<float> logprobs;  // tokens.size() − 1 values when asked for, empty otherwise
};

ServerAnswer server_answer(const Completion& completion, const Tokenizer& tokenizer, bool with_logprobs);

// {"text": [...], "segments": [[...], ...], "tokens": [[...], ...]} plus "logprobs" (a
// non-finite log-probability is null) when asked for.
std::string server_response_json(std::span<const ServerAnswer> answers, bool with_logprobs);

// The body of every refusal: {"message": "..."}, the shape Megatron's command-line client
// (tools/text_generation_cli.py) reads an error from.
std::string server_error_json(std::string_view message);

}  // namespace mgt
