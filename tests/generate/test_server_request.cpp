// The server's request checks: Megatron's MegatronGenerate.put checks, in its order and with its
// messages, Python's isinstance typing of JSON values, and the refusals mgt adds (malformed
// JSON, a body that is not an object, prompts that are not strings).
#include <catch2/catch.hpp>
#include <string>

#include "generate/server_request.hpp"

using namespace mgt;

namespace {

// The message a body is refused with, or "" when it is accepted.
std::string refusal(const std::string& body) {
  try {
    parse_server_request(body);
  } catch (const BadRequest& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("A server request takes Megatron's defaults", "[generate][server]") {
  const ServerRequest r = parse_server_request(R"({"prompts": ["Hello", "Caf\u00e9"]})");
  CHECK(r.prompts == std::vector<std::string>{"Hello", "Café"});
  CHECK(r.tokens_to_generate == 64);
  CHECK_FALSE(r.logprobs);
  CHECK(r.temperature == 1.0);
  CHECK(r.top_k == 0);
  CHECK(r.top_p == 0.0);
  CHECK_FALSE(r.add_bos);
  CHECK_FALSE(r.random_seed.has_value());
  CHECK_FALSE(r.no_log);
  CHECK(r.stop_token == 50256);
  CHECK(r.length_penalty == 1.0);
}

TEST_CASE("A server request reads every field", "[generate][server]") {
  const ServerRequest r = parse_server_request(
      R"({"prompts": [""], "tokens_to_generate": 5, "logprobs": true, "temperature": 2, "top_k": 0,
          "top_p": 0.9, "top_p_decay": 0.5, "top_p_bound": 0.25, "add_BOS": true, "stop_on_double_eol": true,
          "stop_on_eol": true, "prevent_newline_after_colon": true, "random_seed": 7, "no_log": true,
          "stop_token": 3, "length_penalty": 0.5, "unknown": [1, 2]})");
  CHECK(r.tokens_to_generate == 5);
  CHECK(r.logprobs);
  CHECK(r.temperature == 2.0);
  CHECK(r.top_p == 0.9);
  CHECK(r.top_p_decay == 0.5);
  CHECK(r.top_p_bound == 0.25);
  CHECK(r.add_bos);
  CHECK(r.stop_on_double_eol);
  CHECK(r.stop_on_eol);
  CHECK(r.prevent_newline_after_colon);
  CHECK(r.random_seed == 7u);
  CHECK(r.no_log);
  CHECK(r.stop_token == 3);
  CHECK(r.length_penalty == 0.5);

  // Python's typing: a bool is an int; the last of duplicate keys wins, as in json.loads.
  CHECK(parse_server_request(R"({"prompts": ["a"], "tokens_to_generate": true})").tokens_to_generate == 1);
  CHECK(parse_server_request(R"({"prompts": ["a"], "top_k": 3, "top_k": 4})").top_k == 4);
}

TEST_CASE("Server requests are refused with Megatron's messages", "[generate][server]") {
  CHECK(refusal(R"({"prompts": ["a"]})").empty());
  CHECK(refusal(R"({})") == "prompts argument required");
  CHECK(refusal(R"({"prompts": ["a"], "max_len": 3})") == "max_len is no longer used.  Replace with tokens_to_generate");
  CHECK(refusal(R"({"prompts": ["a"], "sentences": ["a"]})") == "sentences is no longer used.  Replace with prompts");
  CHECK(refusal(R"({"prompts": ["a"], "beam_width": 2})") == "Beam search is no longer supported.");
  CHECK(refusal(R"({"prompts": "a"})") == "prompts is not a list of strings");
  CHECK(refusal(R"({"prompts": ["a", 3]})") == "prompts is not a list of strings");
  CHECK(refusal(R"({"prompts": []})") == "prompts is empty");
  std::string many = R"({"prompts": ["a")";
  for (int i = 0; i < 128; ++i) many += R"(, "a")";
  CHECK(refusal(many + "]}") == "Maximum number of prompts is 128");

  const std::string p = R"({"prompts": ["a"], )";
  CHECK(refusal(p + R"("tokens_to_generate": 1.5})") == "tokens_to_generate must be an integer greater than 0");
  CHECK(refusal(p + R"("tokens_to_generate": -1})") == "tokens_to_generate must be an integer greater than or equal to 0");
  CHECK(refusal(p + R"("logprobs": 1})") == "logprobs must be a boolean value");
  CHECK(refusal(p + R"("tokens_to_generate": 0})") == "tokens_to_generate=0 implies logprobs should be True");
  CHECK(refusal(p + R"("tokens_to_generate": 0, "logprobs": true})").empty());
  CHECK(refusal(p + R"("temperature": "hot"})") == "temperature must be a positive number less than or equal to 1000.0");
  CHECK(refusal(p + R"("temperature": 0})") == "temperature must be a positive number less than or equal to 100.0");
  CHECK(refusal(p + R"("temperature": 100.5})") == "temperature must be a positive number less than or equal to 100.0");
  CHECK(refusal(p + R"("top_k": 2.0})") ==
        "top_k must be an integer equal to or greater than 0 and less than or equal to 1000");
  CHECK(refusal(p + R"("top_k": 1001})") == "top_k must be equal to or greater than 0 and less than or equal to 1000");
  CHECK(refusal(p + R"("top_p": 1})") == "top_p must be a positive float less than or equal to 1.0");
  CHECK(refusal(p + R"("top_k": 5, "top_p": 0.5})") == "cannot set both top-k and top-p samplings.");
  CHECK(refusal(p + R"("top_p": 1.5})") == "top_p must be less than or equal to 1.0");
  CHECK(refusal(p + R"("top_p_decay": 0.5})") == "top_p_decay cannot be set without top_p");
  CHECK(refusal(p + R"("top_p": 0.5, "top_p_decay": 2.0})") == "top_p_decay must be less than or equal to 1.0");
  CHECK(refusal(p + R"("top_p": 0.5, "top_p_decay": 1})") ==
        "top_p_decay must be a positive float less than or equal to 1.0");
  CHECK(refusal(p + R"("top_p_bound": 0.5})") == "top_p_bound cannot be set without top_p");
  CHECK(refusal(p + R"("top_p": 0.5, "top_p_bound": 0.75})") == "top_p_bound must be greater than 0 and less than top_p");
  CHECK(refusal(R"({"prompts": ["a", ""]})") == "Empty prompts require add_BOS=true");
  CHECK(refusal(p + R"("add_BOS": "yes"})") == "add_BOS must be a boolean value");
  CHECK(refusal(p + R"("stop_on_eol": null})") == "stop_on_eol must be a boolean value");
  CHECK(refusal(p + R"("stop_on_double_eol": 0})") == "stop_on_double_eol must be a boolean value");
  CHECK(refusal(p + R"("prevent_newline_after_colon": [] })") == "prevent_newline_after_colon must be a boolean value");
  CHECK(refusal(p + R"("random_seed": "1"})") == "random_seed must be integer");
  CHECK(refusal(p + R"("random_seed": -2})") == "random_seed must be a positive integer");
  CHECK(refusal(p + R"("no_log": "true"})") == "no_log must be a boolean value");
  CHECK(refusal(p + R"("stop_token": 1.0})") == "stop_token must be an integer");
  CHECK(refusal(p + R"("length_penalty": 1})") == "length_penalty must be a float");

  // The first failing check in Megatron's order gives the message.
  CHECK(refusal(R"({"prompts": [], "temperature": 0})") == "prompts is empty");
}

TEST_CASE("Bodies that are not a JSON object are refused", "[generate][server]") {
  CHECK_THAT(refusal(""), Catch::StartsWith("the request body is not valid JSON"));
  CHECK_THAT(refusal(R"({"prompts": ["a"])"), Catch::StartsWith("the request body is not valid JSON"));
  CHECK_THAT(refusal("{\"prompts\": [\"\xff\"]}"), Catch::StartsWith("the request body is not valid JSON"));
  CHECK(refusal(R"(["prompts"])") == "the request body must be a JSON object");
  CHECK(refusal("3") == "the request body must be a JSON object");
}

TEST_CASE("An integer wider than 64 bits is refused by name, not as invalid JSON", "[generate][server]") {
  CHECK(refusal(R"({"prompts": ["a"], "tokens_to_generate": 100000000000000000000000000000})") ==
        "tokens_to_generate is 100000000000000000000000000000, too large: integers in a request must fit in 64 bits");
  CHECK_THAT(refusal(R"({"prompts": ["a"], "random_seed": -99999999999999999999})"),
             Catch::StartsWith("random_seed is -99999999999999999999, too large"));
  // 2^64 − 1 fits (as a seed); digits inside a string are text.
  CHECK(parse_server_request(R"({"prompts": ["a"], "random_seed": 18446744073709551615})").random_seed ==
        18446744073709551615u);
  CHECK(parse_server_request(R"({"prompts": ["100000000000000000000000000000"]})").prompts.size() == 1);
}

TEST_CASE("A server request becomes generation settings", "[generate][server]") {
  const ServerRequest r = parse_server_request(
      R"({"prompts": ["a"], "tokens_to_generate": 7, "logprobs": true, "top_p": 0.5, "temperature": 0.5,
          "add_BOS": true, "stop_on_eol": true})");
  const GenerationSettings s = generation_settings(r, 100);
  CHECK(s.max_new_tokens == 7);
  CHECK(s.return_log_probs);
  CHECK(s.return_prompt_log_probs);
  CHECK(s.sampling.top_k == 0);
  CHECK(s.sampling.top_p == 0.5);
  CHECK(s.sampling.temperature == 0.5);
  CHECK(s.add_bos);
  CHECK(s.stop_on_eol);
  CHECK_FALSE(s.stop_on_double_eol);

  // Megatron's sampling asserts top_k <= vocabulary; the server refuses it instead.
  const ServerRequest big_k = parse_server_request(R"({"prompts": ["a"], "top_k": 50})");
  CHECK_THROWS_AS(generation_settings(big_k, 20), BadRequest);
  CHECK(generation_settings(big_k, 50).sampling.top_k == 50);
}
