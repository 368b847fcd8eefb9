// One completion as the JSON line mgt-generate writes:
//   {"index": 0, "prompt": "...", "text": "...", "tokens": [..], "log_probs": [..],
//    "finish_reason": "eod" | "stop" | "length", "prompt_tokens": N, "generated_tokens": M}
// ("log_probs" only when asked for; a non-finite one is null, and "log_probs_null_reason" says
// why). Strings are escaped like Python's json.dumps.
#pragma once
#include <cstdint>
#include <string>

#include "generate/generator.hpp"

namespace mgt {

std::string completion_json(int64_t index, const std::string& prompt, const Completion& completion,
                            bool with_log_probs);

}  // namespace mgt
