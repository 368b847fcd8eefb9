#include "generate/server_response.hpp"

#include <cmath>

#include "core/json_text.hpp"

namespace mgt {

ServerAnswer server_answer(const Completion& c, const Tokenizer& tokenizer, bool with_logprobs) {
  ServerAnswer a;
  a.tokens = c.prompt_tokens;
  a.tokens.insert(a.tokens.end(), c.tokens.begin(), c.tokens.end());
  // Megatron keeps the token that ended the generation in the answer.
  const bool ended_by_eod = c.finish_reason == FinishReason::kEndOfDocument;
  if (ended_by_eod) a.tokens.push_back(tokenizer.eod());
  a.text = tokenizer.detokenize(a.tokens);
  a.segments.reserve(a.tokens.size());
  for (const TokenId id : a.tokens) a.segments.push_back(tokenizer.detokenize(std::span<const TokenId>(&id, 1)));
  if (with_logprobs) {
    a.logprobs = c.prompt_log_probs;
    a.logprobs.insert(a.logprobs.end(), c.log_probs.begin(), c.log_probs.end());
    if (ended_by_eod) a.logprobs.push_back(c.end_of_document_log_prob);
  }
  return a;
}

std::string server_response_json(std::span<const ServerAnswer> answers, bool with_logprobs) {
  auto list = [&](auto&& item) {
    std::string out = "[";
    for (size_t i = 0; i < answers.size(); ++i) out += (i ? ", " : "") + item(answers[i]);
    return out + "]";
  };
  auto inner = [](const auto& values, auto&& write) {
    std::string out = "[";
    for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + write(values[i]);
    return out + "]";
  };
  std::string out = "{\"text\": " + list([](const ServerAnswer& a) { return json_quote(a.text); });
  out += ", \"segments\": " + list([&](const ServerAnswer& a) {
           return inner(a.segments, [](const std::string& s) { return json_quote(s); });
         });
  out += ", \"tokens\": " + list([&](const ServerAnswer& a) {
           return inner(a.tokens, [](TokenId t) { return std::to_string(t); });
         });
  if (with_logprobs)
    out += ", \"logprobs\": " + list([&](const ServerAnswer& a) {
             return inner(a.logprobs, [](float v) { return json_float(v); });
           });
  return out + "}";
}

std::string server_error_json(std::string_view message) { return "{\"message\": " + json_quote(message) + "}"; }

}  // namespace mgt
