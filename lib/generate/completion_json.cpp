#include "generate/completion_json.hpp"

#include "core/json_text.hpp"

namespace mgt {

std::string completion_json(int64_t index, const std::string& prompt, const Completion& c, bool with_log_probs) {
  std::string out = "{\"index\": " + std::to_string(index) + ", \"prompt\": " + json_quote(prompt) +
                    ", \"text\": " + json_quote(c.text) + ", \"tokens\": [";
  for (size_t i = 0; i < c.tokens.size(); ++i) out += (i ? ", " : "") + std::to_string(c.tokens[i]);
  out += "]";
  if (with_log_probs) {
    out += ", \"log_probs\": [";
    for (size_t i = 0; i < c.log_probs.size(); ++i) out += (i ? ", " : "") + python_float_repr(c.log_probs[i]);
    out += "]";
  }
  out += ", \"finish_reason\": " + json_quote(std::string(to_string(c.finish_reason))) +
         ", \"prompt_tokens\": " + std::to_string(c.prompt_tokens.size()) +
         ", \"generated_tokens\": " + std::to_string(c.tokens.size()) + "}";
  return out;
}

}  // namespace mgt
