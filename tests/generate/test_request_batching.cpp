// The server's queue and the model's side of it: requests taken together up to a number of
// prompts, each answered on its own (its own settings, its own refusal), a seeded request
// answered the same whichever requests share its batch, on a tiny model with a NullTokenizer.
#include <simdjson.h>

#include <catch2/catch.hpp>

#include <limits>
#include <string>
#include <vector>

#include "../model/model_testing.hpp"
#include "generate/batch_answerer.hpp"
#include "generate/request_queue.hpp"
#include "kernels/backend_factory.hpp"
#include "tokenizer/null_tokenizer.hpp"

using namespace mgt;
using namespace mgt::model_testing;

namespace {

ServerRequest request_with(std::vector<std::string> prompts) {
  ServerRequest r;
  r.prompts = std::move(prompts);
  return r;
}

// Answers requests as one batch, returning their replies in order.
std::vector<ServerReply> answer_together(BatchAnswerer& answerer, std::vector<ServerRequest> requests) {
  std::vector<PendingRequest> batch(requests.size());
  std::vector<std::future<ServerReply>> futures;
  for (size_t i = 0; i < requests.size(); ++i) {
    batch[i].request = std::move(requests[i]);
    batch[i].number = i;
    futures.push_back(batch[i].reply.get_future());
  }
  answerer.answer(batch);
  std::vector<ServerReply> replies;
  for (auto& f : futures) replies.push_back(f.get());
  return replies;
}

std::string message_of(const ServerReply& reply) {
  simdjson::dom::parser parser;
  return std::string(std::string_view(parser.parse(reply.body)["message"]));
}

}  // namespace

TEST_CASE("The request queue batches waiting requests up to a number of prompts", "[generate][server]") {
  RequestQueue queue(3);
  auto a = queue.submit(request_with({"1"}));
  auto b = queue.submit(request_with({"1", "2"}));
  auto c = queue.submit(request_with({"1", "2", "3", "4"}));  // more than 3 alone: still taken
  std::vector<PendingRequest> first = queue.next_batch();
  REQUIRE(first.size() == 2);
  CHECK(first[0].number == 0);
  CHECK(first[1].number == 1);
  std::vector<PendingRequest> second = queue.next_batch();
  REQUIRE(second.size() == 1);
  CHECK(second[0].request.prompts.size() == 4);

  queue.close();
  auto late = queue.submit(request_with({"1"}));
  CHECK(late.get().status == 503);
  CHECK(queue.next_batch().empty());
  for (auto* batch : {&first, &second})
    for (PendingRequest& p : *batch) p.reply.set_value({200, "{}"});
  CHECK(a.get().status == 200);
  CHECK(b.get().status == 200);
  CHECK(c.get().status == 200);
}

TEST_CASE("Batched requests are answered each with its own settings", "[generate][server]") {
  GptConfig config = gpt2_like_config();
  config.max_position_embeddings = 24;
  config.seq_length = 16;
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(config, backend, 5);
  randomize_parameters(model.parameters(), 5);
  NullTokenizer tokenizer(20);
  Generator generator(model, tokenizer, GenerationSettings{});
  BatchAnswerer answerer(generator, tokenizer, 1234, 2);

  ServerRequest sampled = request_with({"1 2 3", "4", "5 6"});
  sampled.tokens_to_generate = 6;
  sampled.temperature = 2.0;
  sampled.random_seed = 11;
  sampled.logprobs = true;
  ServerRequest greedy = request_with({"7 8"});
  greedy.tokens_to_generate = 4;
  greedy.top_k = 1;
  ServerRequest too_long = request_with({"1 2 3 4 5"});
  too_long.tokens_to_generate = 20;  // 5 + 20 > 24 positions
  // Near 2^63 the prompt's length added to it once wrapped negative and passed the check.
  ServerRequest huge = request_with({"1 2"});
  huge.tokens_to_generate = std::numeric_limits<int64_t>::max() - 1;
  ServerRequest not_numbers = request_with({"one two"});
  // Ids outside the model's vocabulary: refused, not a generation failure (500).
  ServerRequest outside = request_with({"1 2", "3 " + std::to_string(config.padded_vocab_size)});

  const std::vector<ServerReply> replies =
      answer_together(answerer, {sampled, greedy, too_long, not_numbers, outside, huge});
  REQUIRE(replies[0].status == 200);
  REQUIRE(replies[1].status == 200);
  CHECK(replies[2].status == 400);
  CHECK(message_of(replies[2]) == "Length of prompt + tokens_to_generate longer than allowed");
  CHECK(replies[3].status == 400);
  CHECK(replies[4].status == 400);
  CHECK(replies[5].status == 400);
  CHECK(message_of(replies[5]) == "Length of prompt + tokens_to_generate longer than allowed");
  CHECK_THAT(message_of(replies[4]), Catch::StartsWith("prompts[1]: NullTokenizer: token '" +
                                                       std::to_string(config.padded_vocab_size) +
                                                       "' is outside the vocabulary"));

  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(replies[0].body);
  REQUIRE(doc["text"].get_array().size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    const size_t tokens = doc["tokens"].at(i).get_array().size();
    CHECK(doc["segments"].at(i).get_array().size() == tokens);
    CHECK(doc["logprobs"].at(i).get_array().size() == tokens - 1);
    for (simdjson::dom::element lp : doc["logprobs"].at(i).get_array()) CHECK(double(lp) <= 0.0);
  }
  CHECK(std::string_view(doc["text"].at(0)).substr(0, 5) == "1 2 3");
  simdjson::dom::element plain = parser.parse(replies[1].body);
  CHECK(plain["logprobs"].error() == simdjson::NO_SUCH_FIELD);

  // The seeded request alone gets the same answer: the same tokens and texts, and the same
  // log-probabilities up to rounding (alone, its third prompt is a chunk of one row, whose GEMMs
  // the CPU runs as matrix-vector products, summing in another order).
  const std::vector<ServerReply> alone = answer_together(answerer, {sampled});
  REQUIRE(alone[0].status == 200);
  simdjson::dom::parser batched_parser, alone_parser;
  const simdjson::dom::element batched = batched_parser.parse(replies[0].body);
  const simdjson::dom::element a = alone_parser.parse(alone[0].body);
  for (const char* field : {"text", "segments", "tokens"})
    CHECK(simdjson::to_string(a[field]) == simdjson::to_string(batched[field]));
  for (size_t i = 0; i < 3; ++i) {
    simdjson::dom::array expected = batched["logprobs"].at(i).get_array();
    simdjson::dom::array got = a["logprobs"].at(i).get_array();
    REQUIRE(got.size() == expected.size());
    for (size_t j = 0; j < got.size(); ++j)
      CHECK(double(got.at(j)) == Approx(double(expected.at(j))).epsilon(1e-5).margin(1e-6));
  }
  // Scoring only: the prompt's log-probabilities, nothing generated.
  ServerRequest score = request_with({"1 2 3 4"});
  score.tokens_to_generate = 0;
  score.logprobs = true;
  const ServerReply scored = answer_together(answerer, {score})[0];
  REQUIRE(scored.status == 200);
  simdjson::dom::element s = parser.parse(scored.body);
  CHECK(s["tokens"].at(0).get_array().size() == 4);
  CHECK(s["logprobs"].at(0).get_array().size() == 3);
}
