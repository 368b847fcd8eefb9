#include "generate/completion_json.hpp"

#include <cmath>

#include "core/json_text.hpp"

namespace mgt {

std::string completion_json(int64_t index, const std::string& prompt, const Completion& c, bool with_log_probs) {
  std::string out = "{\"index\": " + std::to_string(index) + ", \"prompt\": " + json_quote(prompt) +
                    ", \"text\": " + json_quote(c.text) + ", \"tokens\": [";
  for (size_t i = 0; i < c.tokens.size(); ++i) out += (i ? ", " : "") + std::to_string(c.tokens[i]);
  out += "]";
  if (with_log_probs) {
    out += ", \"log_probs\": [";
    bool finite = true;
    for (size_t i = 0; i < c.log_probs.size(); ++i) {
      out += (i ? ", " : "") + json_float(c.log_probs[i]);
      finite = finite && std::isfinite(c.log_probs[i]);
    }
    out += "]";
    // Strict JSON has no NaN or -Infinity: such a value is null, and the line says why.
    if (!finite)
      out += ", \"log_probs_null_reason\": \"a null log-probability was not a finite number (NaN or -Infinity "
             "from the model's logits)\"";
  }
  out += ", \"finish_reason\": " + json_quote(std::string(to_string(c.finish_reason))) +
         ", \"prompt_tokens\": " + std::to_string(c.prompt_tokens.size()) +
         ", \"generated_tokens\": " + std::to_string(c.tokens.size()) + "}";
  return out;
}

}  // namespace mgt
