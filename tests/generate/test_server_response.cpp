// The server's answers: Megatron's {"text", "segments", "logprobs"} (and "tokens") over the
// whole sequence, the end-of-document token kept when it ended the generation, strict JSON
// throughout, and the {"message"} body of a refusal.
#include <simdjson.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "generate/server_response.hpp"
#include "tokenizer/null_tokenizer.hpp"

using namespace mgt;

TEST_CASE("A completion becomes Megatron's answer over prompt and generated tokens", "[generate][server]") {
  NullTokenizer tokenizer(20);
  Completion c;
  c.prompt_tokens = {1, 2};
  c.tokens = {3};
  c.log_probs = {-0.5f};
  c.prompt_log_probs = {-1.5f};
  c.finish_reason = FinishReason::kEndOfDocument;
  c.end_of_document_log_prob = -0.25f;
  const ServerAnswer a = server_answer(c, tokenizer, true);
  CHECK(a.tokens == std::vector<TokenId>{1, 2, 3, tokenizer.eod()});
  CHECK(a.text == "1 2 3 20");
  CHECK(a.segments == std::vector<std::string>{"1", "2", "3", "20"});
  CHECK(a.logprobs == std::vector<float>{-1.5f, -0.5f, -0.25f});

  c.finish_reason = FinishReason::kLength;
  const ServerAnswer b = server_answer(c, tokenizer, false);
  CHECK(b.tokens == std::vector<TokenId>{1, 2, 3});
  CHECK(b.logprobs.empty());
}

TEST_CASE("Server answers are strict JSON", "[generate][server]") {
  ServerAnswer a{"Caf\xc3\xa9\n", {"Caf", "\xc3", "\n"}, {1, 2, 3}, {-1.0f, std::numeric_limits<float>::quiet_NaN()}};
  ServerAnswer b{"x", {"x"}, {4}, {}};
  const std::vector<ServerAnswer> answers = {a, b};

  simdjson::dom::parser parser;
  const std::string with = server_response_json(answers, true);
  simdjson::dom::element doc = parser.parse(with);
  CHECK(std::string_view(doc["text"].at(0)) == "Café\n");
  CHECK(std::string_view(doc["segments"].at(0).at(1)) == "\xef\xbf\xbd");  // a lone byte: U+FFFD
  CHECK(int64_t(doc["tokens"].at(1).at(0)) == 4);
  CHECK(double(doc["logprobs"].at(0).at(0)) == -1.0);
  CHECK(doc["logprobs"].at(0).at(1).is_null());
  CHECK(doc["logprobs"].at(1).get_array().size() == 0);

  const std::string without = server_response_json(answers, false);
  simdjson::dom::element plain = parser.parse(without);
  CHECK(plain["logprobs"].error() == simdjson::NO_SUCH_FIELD);
  CHECK(plain["text"].get_array().size() == 2);

  simdjson::dom::element error = parser.parse(server_error_json("top_p must be \"less\""));
  CHECK(std::string_view(error["message"]) == "top_p must be \"less\"");
}
