// One request to mgt-generate's server: the JSON body of Megatron's `PUT /api`, checked the way
// Megatron's MegatronGenerate.put checks it (megatron/core/inference/text_generation_server/
// text_generation_server.py, and the same checks in Megatron-LM's earlier
// megatron/inference/text_generation_server.py), with the same messages, so that a client
// written for Megatron sees the same refusals. Where Megatron answers a refusal with HTTP 200 or
// fails later with a server error (a prompt that is not a string, a body that is not an object),
// mgt refuses with 400.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "generate/generator.hpp"

namespace mgt {

struct ServerRequest {
  std::vector<std::string> prompts;
  int64_t tokens_to_generate = 64;
  bool logprobs = false;
  double temperature = 1.0;
  int64_t top_k = 0;  // 0 with top_p 0: sample from the whole distribution
  double top_p = 0.0;
  double top_p_decay = 0.0;
  double top_p_bound = 0.0;
  bool add_bos = false;  // add_BOS
  bool stop_on_double_eol = false;
  bool stop_on_eol = false;
  bool prevent_newline_after_colon = false;
  std::optional<uint64_t> random_seed;  // absent: the server's --seed and the request's number
  bool no_log = false;
  // Checked like Megatron, which uses them for beam search only; mgt has no beam search.
  int64_t stop_token = 50256;
  double length_penalty = 1.0;
};

// A request refused before any generation; `what()` is the message for the client.
class BadRequest : public Error {
public:
  explicit BadRequest(const std::string& message) : Error(message) {}
};

// Parses and checks a request body; throws BadRequest with Megatron's message.
ServerRequest parse_server_request(std::string_view body);

// The generation settings of a request; throws BadRequest when its sampling does not fit the
// tokenizer's vocabulary (a top_k above the vocabulary size: Megatron's sampling asserts).
GenerationSettings generation_settings(const ServerRequest& request, int64_t vocab_size);

// The most prompts one request may hold (Megatron's limit).
inline constexpr int64_t kMaxPromptsPerRequest = 128;

}  // namespace mgt
