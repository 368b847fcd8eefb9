// Generation over a KV-cached model: the same tokens as a plain greedy loop over whole
// sequences, reproducible sampling that does not depend on the batch, and each way a completion
// ends (end of document, stop text, length), on tiny models with a NullTokenizer.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "../model/model_testing.hpp"
#include "test_paths.hpp"
#include "generate/generator.hpp"
#include "kernels/backend_factory.hpp"
#include "tokenizer/null_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace mgt;
using namespace mgt::model_testing;

namespace {

constexpr int64_t kNullVocab = 20;  // ids 0…19, eod 20, padded vocabulary 32

GptConfig generation_config(GptConfig c) {
  c.max_position_embeddings = 24;
  c.seq_length = 16;
  return c;
}

// Greedy continuation of one prompt by running the whole sequence through forward_only for
// every new token: what the KV cache must reproduce.
std::vector<TokenId> uncached_greedy(GptModel& model, std::vector<int64_t> ids, int64_t new_tokens,
                                     int64_t true_vocab) {
  std::vector<TokenId> out;
  const int64_t vocab = model.config().padded_vocab_size;
  for (int64_t step = 0; step < new_tokens; ++step) {
    MicroBatch m;
    m.batch_size = 1;
    m.seq_length = static_cast<int64_t>(ids.size());
    m.tokens = ids;
    const std::vector<float> logits = model.forward_only(m, true).logits;
    const float* last = logits.data() + (m.seq_length - 1) * vocab;
    int64_t best = 0;
    for (int64_t v = 1; v < true_vocab; ++v)
      if (last[v] > last[best]) best = v;
    out.push_back(static_cast<TokenId>(best));
    ids.push_back(best);
  }
  return out;
}

// Every position predicts `target`: the final LayerNorm's output is its bias, a multiple of
// target's embedding row, which is much longer than every other row (tied output layer).
void force_prediction(GptModel& model, int64_t target) {
  GptParameters& p = model.parameters();
  const int64_t h = model.config().hidden_size;
  const ParameterEntry& words = p.entry("embedding.word_embeddings.weight");
  std::vector<float> table = p.read_param(words);
  for (float& v : table) v *= 0.1f;
  for (int64_t i = 0; i < h; ++i) table[static_cast<size_t>(target * h + i)] = 1.0f;
  p.write_param(words, table);
  p.write_param(p.entry("decoder.final_layernorm.weight"), std::vector<float>(static_cast<size_t>(h), 0.0f));
  p.write_param(p.entry("decoder.final_layernorm.bias"), std::vector<float>(static_cast<size_t>(h), 3.0f));
}

std::vector<int64_t> as_ids(const std::vector<TokenId>& t) { return {t.begin(), t.end()}; }

}  // namespace

TEST_CASE("KV-cached greedy generation equals greedy decoding over whole sequences", "[generate]") {
  for (const GptConfig& config : {generation_config(gpt2_like_config()), generation_config(llama_like_config())}) {
    const auto backend_owner = make_backend("cpu");
    Backend& backend = *backend_owner;
    GptModel model(config, backend, 3);
    randomize_parameters(model.parameters(), 3);
    NullTokenizer tokenizer(kNullVocab);
    GenerationSettings s;
    s.max_new_tokens = 9;
    Generator generator(model, tokenizer, s);
    const std::vector<std::string> prompts = {"1 2 3", "4 5", "6 7 8 9 10 11 12"};
    const std::vector<Completion> got = generator.generate(prompts);
    REQUIRE(got.size() == 3);
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::vector<TokenId> want =
          uncached_greedy(model, as_ids(tokenizer.tokenize(prompts[i])), 9, tokenizer.vocab_size());
      std::vector<TokenId> got_all = got[i].tokens;
      // A greedy eod ends the completion early; compare up to it.
      REQUIRE(got_all.size() <= want.size());
      CHECK(std::equal(got_all.begin(), got_all.end(), want.begin()));
      if (got_all.size() < want.size()) CHECK(want[got_all.size()] == tokenizer.eod());
    }
  }
}

TEST_CASE("A sequence length bound ends completions early and is capped by the positions", "[generate]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(generation_config(gpt2_like_config()), backend, 3);
  randomize_parameters(model.parameters(), 3);
  NullTokenizer tokenizer(kNullVocab);
  GenerationSettings s;
  s.max_new_tokens = 9;
  Generator bounded(model, tokenizer, s, 5);
  CHECK(bounded.max_sequence_length() == 5);
  const Completion full = Generator(model, tokenizer, s).generate(std::vector<std::string>{"1 2"}).front();
  const Completion cut = bounded.generate(std::vector<std::string>{"1 2"}).front();
  // The same greedy tokens, up to prompt plus completion = 5 (unless eod came first).
  REQUIRE(cut.tokens.size() <= 3);
  CHECK(std::equal(cut.tokens.begin(), cut.tokens.end(), full.tokens.begin()));
  if (cut.tokens.size() == 3) CHECK(cut.finish_reason == FinishReason::kLength);
  CHECK_THROWS_WITH(bounded.generate(std::vector<std::string>{"1 2 3 4 5"}), Catch::Contains("leave no room"));
  const int64_t positions = model.config().max_position_embeddings;
  CHECK(Generator(model, tokenizer, s, positions + 100).max_sequence_length() == positions);
  CHECK(Generator(model, tokenizer, s).max_sequence_length() == positions);
}

TEST_CASE("Seeded sampling is reproducible and independent of the batch", "[generate]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(generation_config(gpt2_like_config()), backend, 5);
  randomize_parameters(model.parameters(), 5);
  NullTokenizer tokenizer(kNullVocab);
  GenerationSettings s;
  s.max_new_tokens = 8;
  s.sampling.top_k = 0;
  s.sampling.temperature = 2.0;  // flat enough that the draws matter
  s.seed = 99;
  Generator generator(model, tokenizer, s);
  const std::vector<std::string> prompts = {"1 2 3", "4", "5 6 7 8"};
  const std::vector<Completion> a = generator.generate(prompts);
  const std::vector<Completion> b = generator.generate(prompts);
  for (size_t i = 0; i < prompts.size(); ++i) CHECK(a[i].tokens == b[i].tokens);

  // Prompt 2 alone, as the third prompt of a run (stream 2), gives the same completion.
  const std::vector<Completion> alone = generator.generate(std::vector<std::string>{prompts[2]}, 2);
  CHECK(alone[0].tokens == a[2].tokens);

  s.seed = 100;
  Generator other(model, tokenizer, s);
  const std::vector<Completion> c = other.generate(prompts);
  bool differs = false;
  for (size_t i = 0; i < prompts.size(); ++i) differs |= c[i].tokens != a[i].tokens;
  CHECK(differs);
}

TEST_CASE("A completion ends at end of document, at a stop text, or at its length", "[generate]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(generation_config(gpt2_like_config()), backend, 7);
  NullTokenizer tokenizer(kNullVocab);
  GenerationSettings s;
  s.max_new_tokens = 5;
  s.return_log_probs = true;

  force_prediction(model, 7);
  {
    Generator generator(model, tokenizer, s);
    const Completion c = generator.generate(std::vector<std::string>{"1 2"}).front();
    CHECK(c.tokens == std::vector<TokenId>{7, 7, 7, 7, 7});
    CHECK(c.text == "7 7 7 7 7");
    CHECK(c.finish_reason == FinishReason::kLength);
    CHECK(c.prompt_tokens == std::vector<TokenId>{1, 2});
    REQUIRE(c.log_probs.size() == 5);

    // The log-probability is log_softmax over the padded vocabulary of the plain forward.
    MicroBatch m;
    m.batch_size = 1;
    m.seq_length = 2;
    const std::vector<int64_t> ids = {1, 2};
    m.tokens = ids;
    const std::vector<float> logits = model.forward_only(m, true).logits;
    const float* last = logits.data() + model.config().padded_vocab_size;
    double total = 0.0;
    for (int64_t v = 0; v < model.config().padded_vocab_size; ++v) total += std::exp(double(last[v]));
    CHECK(c.log_probs[0] == Approx(double(last[7]) - std::log(total)).epsilon(1e-5));
  }
  {
    s.stop_strings = {"7 7 7"};
    Generator generator(model, tokenizer, s);
    const Completion c = generator.generate(std::vector<std::string>{"3"}).front();
    CHECK(c.tokens.size() == 3);
    CHECK(c.text.empty());
    CHECK(c.finish_reason == FinishReason::kStop);
    s.stop_strings = {" 7 7"};
    const Completion d = Generator(model, tokenizer, s).generate(std::vector<std::string>{"3"}).front();
    CHECK(d.text == "7");
    s.stop_strings.clear();
  }
  force_prediction(model, tokenizer.eod());
  {
    Generator generator(model, tokenizer, s);
    const Completion c = generator.generate(std::vector<std::string>{"1 2 3"}).front();
    CHECK(c.tokens.empty());
    CHECK(c.text.empty());
    CHECK(c.finish_reason == FinishReason::kEndOfDocument);
  }
}

TEST_CASE("Generation stops at the model's last position and refuses prompts without room", "[generate]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(generation_config(gpt2_like_config()), backend, 7);  // 24 positions
  NullTokenizer tokenizer(kNullVocab);
  force_prediction(model, 4);
  GenerationSettings s;
  s.max_new_tokens = 10;
  Generator generator(model, tokenizer, s);
  std::string twenty = "1";
  for (int i = 1; i < 20; ++i) twenty += " 1";
  const std::vector<Completion> c = generator.generate(std::vector<std::string>{twenty, "2"});
  CHECK(c[0].tokens.size() == 4);  // 20 + 4 = 24 positions
  CHECK(c[0].finish_reason == FinishReason::kLength);
  CHECK(c[1].tokens.size() == 10);

  std::string twenty_four = twenty + " 1 1 1 1";
  CHECK_THROWS_WITH(generator.generate(std::vector<std::string>{"1", twenty_four}, 10),
                    Catch::Contains("prompt 12 has 24 tokens"));
  CHECK_THROWS_WITH(generator.generate(std::vector<std::string>{""}), Catch::Contains("--add-bos"));
  // A prompt of ids (NullTokenizer) outside the model's vocabulary is refused before generating,
  // naming the prompt and its place among those given (for the caller's FILE:LINE).
  const std::string outside = std::to_string(model.config().padded_vocab_size);
  try {
    generator.generate(std::vector<std::string>{"1", "2 " + outside}, 4);
    FAIL("no PromptError");
  } catch (const PromptError& e) {
    CHECK(e.index == 1);
    CHECK_THAT(e.what(), Catch::StartsWith("prompt 6: NullTokenizer: token '" + outside + "' is outside the vocabulary"));
  }
  CHECK_THROWS_AS(generator.generate(std::vector<std::string>{"-1"}), PromptError);
  CHECK_THROWS_AS(generator.generate(std::vector<std::string>{"one"}), PromptError);  // not a number

  s.add_bos = true;
  s.max_new_tokens = 2;
  const Completion b = Generator(model, tokenizer, s).generate(std::vector<std::string>{""}).front();
  CHECK(b.prompt_tokens == std::vector<TokenId>{tokenizer.eod()});
  CHECK(b.tokens == std::vector<TokenId>{4, 4});

  s.max_new_tokens = 0;
  const Completion z = Generator(model, tokenizer, s).generate(std::vector<std::string>{"3"}).front();
  CHECK(z.tokens.empty());
  CHECK(z.finish_reason == FinishReason::kLength);
}

TEST_CASE("Rows with their own settings complete as a generator with each setting does", "[generate]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(generation_config(gpt2_like_config()), backend, 11);
  randomize_parameters(model.parameters(), 11);
  NullTokenizer tokenizer(kNullVocab);
  GenerationSettings greedy;
  greedy.max_new_tokens = 3;
  GenerationSettings sampled;
  sampled.max_new_tokens = 6;
  sampled.sampling.top_k = 0;
  sampled.sampling.temperature = 2.0;
  sampled.seed = 9;
  sampled.return_log_probs = true;
  sampled.return_prompt_log_probs = true;

  Generator generator(model, tokenizer, GenerationSettings{});
  const std::vector<GenerationRow> rows = {{tokenizer.tokenize("1 2 3"), &greedy, 0, 0},
                                           {tokenizer.tokenize("4 5"), &sampled, 9, 0}};
  const std::vector<Completion> both = generator.generate_rows(rows);
  const Completion alone_greedy = Generator(model, tokenizer, greedy).generate(std::vector<std::string>{"1 2 3"}).front();
  const Completion alone_sampled = Generator(model, tokenizer, sampled).generate(std::vector<std::string>{"4 5"}).front();
  CHECK(both[0].tokens == alone_greedy.tokens);
  CHECK(both[1].tokens == alone_sampled.tokens);
  CHECK(both[0].log_probs.empty());
  CHECK(both[0].prompt_log_probs.empty());
  CHECK(both[1].log_probs.size() == both[1].tokens.size());

  // The prompt's log-probabilities: log_softmax over the padded vocabulary of the plain forward.
  REQUIRE(both[1].prompt_log_probs.size() == 1);
  MicroBatch m;
  m.batch_size = 1;
  m.seq_length = 1;
  const std::vector<int64_t> first = {4};
  m.tokens = first;
  const std::vector<float> logits = model.forward_only(m, true).logits;
  double total = 0.0;
  for (int64_t v = 0; v < model.config().padded_vocab_size; ++v) total += std::exp(double(logits[v]));
  CHECK(both[1].prompt_log_probs[0] == Approx(double(logits[5]) - std::log(total)).epsilon(1e-4));

  // A prompt may fill every position when nothing is generated (it is only scored).
  GenerationSettings score;
  score.max_new_tokens = 0;
  score.return_prompt_log_probs = true;
  std::vector<TokenId> full(24, 1);
  const Completion scored = generator.generate_rows(std::vector<GenerationRow>{{full, &score, 0, 0}}).front();
  CHECK(scored.tokens.empty());
  CHECK(scored.prompt_log_probs.size() == 23);
}

TEST_CASE("prevent_newline_after_colon bans the newline token right after a colon token", "[generate]") {
  const auto tokenizer = make_tokenizer({"GPT2BPETokenizer", test::dataset_path("gpt2-vocab.json"),
                                         test::dataset_path("gpt2-merges.txt"), std::nullopt, 0});
  GptConfig config = generation_config(gpt2_like_config());
  config.padded_vocab_size = 50304;
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(config, backend, 7);
  const TokenId newline = tokenizer->tokenize("\n").front();
  force_prediction(model, newline);
  GenerationSettings s;
  s.max_new_tokens = 2;
  const std::vector<std::string> prompts = {"Note:", "Note"};
  const std::vector<Completion> plain = Generator(model, *tokenizer, s).generate(prompts);
  CHECK(plain[0].tokens == std::vector<TokenId>{newline, newline});
  s.prevent_newline_after_colon = true;
  const std::vector<Completion> banned = Generator(model, *tokenizer, s).generate(prompts);
  REQUIRE(banned[0].tokens.size() == 2);
  CHECK(banned[0].tokens[0] != newline);  // after ":"
  CHECK(banned[0].tokens[1] == newline);
  CHECK(banned[1].tokens == plain[1].tokens);  // no colon: unchanged
}
