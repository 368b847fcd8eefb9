// The zero-shot tasks on a real (tiny, random) GPT model: the scorer against the model's own
// logits, and mgt-eval's shortcuts (unpadded rows, skipped empty windows, micro-batches) against
// Megatron's method transcribed literally (every sample padded with eod to seq_length + 1).
#include <catch2/catch.hpp>

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../model/model_testing.hpp"
#include "ckpt/model_checkpoint.hpp"
#include "eval/eval_job.hpp"
#include "eval/lambada_task.hpp"
#include "eval/lm_windows.hpp"
#include "eval/model_scorer.hpp"
#include "eval/wikitext_task.hpp"
#include "kernels/backend_factory.hpp"
#include "test_paths.hpp"

using namespace mgt;

namespace {

constexpr std::int64_t kEod = 30;  // NullTokenizer --vocab-size 30: ids 0-29, eod 30, padded vocab 32

GptConfig tiny_config() { return model_testing::gpt2_like_config(); }  // seq 8, vocab 32

std::unique_ptr<GptModel> tiny_model(Backend& backend) {
  auto model = std::make_unique<GptModel>(tiny_config(), backend);
  model_testing::randomize_parameters(model->parameters(), 17);
  return model;
}

std::vector<TokenId> random_ids(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<TokenId> ids(n);
  for (TokenId& id : ids) id = static_cast<TokenId>(gen() % kEod);
  return ids;
}

// Megatron's forward over full samples of seq + 1 tokens: per-position losses and argmax.
struct Literal {
  std::vector<float> losses;
  std::vector<std::int64_t> argmax;
  std::vector<std::int64_t> labels;
};

Literal megatron_forward(GptModel& model, const std::vector<std::vector<std::int64_t>>& samples, std::int64_t seq) {
  std::vector<std::int64_t> tokens, labels;
  for (const auto& s : samples) {
    tokens.insert(tokens.end(), s.begin(), s.end() - 1);
    labels.insert(labels.end(), s.begin() + 1, s.end());
  }
  MicroBatch mb;
  mb.batch_size = static_cast<std::int64_t>(samples.size());
  mb.seq_length = seq;
  mb.tokens = tokens;
  mb.labels = labels;
  ForwardOutput out = model.forward_only(mb, true);
  Literal lit{std::move(out.losses), {}, labels};
  const auto vocab = static_cast<std::size_t>(model.config().padded_vocab_size);
  for (std::size_t p = 0; p < lit.labels.size(); ++p) {
    const float* row = out.logits.data() + p * vocab;
    lit.argmax.push_back(std::max_element(row, row + vocab) - row);
  }
  return lit;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("GptModelScorer returns the model's losses and the argmax of its logits", "[eval]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  auto model = tiny_model(backend);
  const std::vector<TokenId> ids = random_ids(2 * 6 + 1, 3);
  std::vector<std::int64_t> tokens(ids.begin(), ids.begin() + 12), labels(ids.begin() + 1, ids.end());
  GptModelScorer scorer(*model);
  const TokenScores s = scorer.score({2, 6, tokens, labels, true});
  MicroBatch mb;
  mb.batch_size = 2;
  mb.seq_length = 6;
  mb.tokens = tokens;
  mb.labels = labels;
  const ForwardOutput out = model->forward_only(mb, true);
  REQUIRE(s.losses.size() == 12);
  REQUIRE(s.argmax.size() == 12);
  for (std::size_t p = 0; p < 12; ++p) {
    CHECK(s.losses[p] == out.losses[p]);
    const float* row = out.logits.data() + p * 32;
    CHECK(s.argmax[p] == std::max_element(row, row + 32) - row);
  }
  CHECK(scorer.score({2, 6, tokens, labels, false}).argmax.empty());
}

TEST_CASE("LAMBADA on a real model agrees with Megatron's padded method", "[eval]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  auto model = tiny_model(backend);
  const std::int64_t seq = 8;
  std::vector<LambadaExample> examples;
  for (std::uint32_t i = 0; i < 9; ++i) {
    const std::vector<TokenId> ids = random_ids(2 + i % 10, 100 + i);  // 2 to 10 tokens: some truncated
    const std::size_t target = 1 + i % 2;
    examples.push_back({i + 1, {ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(target)},
                        {ids.end() - static_cast<std::ptrdiff_t>(target), ids.end()}});
  }
  // Make the model right on some examples: the target becomes the model's own prediction.
  {
    GptModelScorer scorer(*model);
    for (std::size_t i = 0; i < examples.size(); i += 2) {
      LambadaExample& e = examples[i];
      e.target.resize(1);
      const ScoringRow row = lambada_row(e, seq).row;
      const TokenScores s = scorer.score({1, std::ssize(row.tokens), row.tokens, row.labels, true});
      e.target[0] = static_cast<TokenId>(s.argmax.back());
    }
  }

  // Megatron: context + target (its last seq + 1 tokens), eod padding, mask on the target.
  std::vector<std::vector<std::int64_t>> samples;
  std::vector<std::vector<int>> masks;
  for (const LambadaExample& e : examples) {
    std::vector<std::int64_t> s(e.context.begin(), e.context.end());
    s.insert(s.end(), e.target.begin(), e.target.end());
    std::vector<int> mask(e.context.size(), 0);
    mask.resize(s.size(), 1);
    while (std::ssize(s) > seq + 1) {
      s.erase(s.begin());
      mask.erase(mask.begin());
    }
    while (std::ssize(s) < seq + 1) {
      s.push_back(kEod);
      mask.push_back(0);
    }
    mask.erase(mask.begin());
    samples.push_back(s);
    masks.push_back(mask);
  }
  const Literal lit = megatron_forward(*model, samples, seq);
  std::int64_t correct = 0, targets = 0;
  double loss_sum = 0;
  for (std::size_t r = 0; r < samples.size(); ++r) {
    bool right = true;
    for (std::int64_t j = 0; j < seq; ++j) {
      const std::size_t p = r * static_cast<std::size_t>(seq) + static_cast<std::size_t>(j);
      if (!masks[r][static_cast<std::size_t>(j)]) continue;
      right = right && lit.argmax[p] == lit.labels[p];
      loss_sum += lit.losses[p];
      ++targets;
    }
    correct += right;
  }
  REQUIRE(correct >= 5);  // the planted examples at least

  GptModelScorer scorer(*model);
  for (std::int64_t mbs : {1, 4}) {
    const LambadaResult r = evaluate_lambada(examples, scorer, {seq, mbs, kEod, "x"});
    CHECK(r.correct == correct);
    CHECK(r.target_tokens == targets);
    CHECK(r.target_loss_sum == Approx(loss_sum).epsilon(1e-5));
    CHECK(r.truncated == 1);  // the 10-token example (9 + 1 > seq + 1 only there)
  }
}

TEST_CASE("WikiText windows on a real model agree with Megatron's padded method", "[eval]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  auto model = tiny_model(backend);
  const std::int64_t seq = 8;
  WikitextData data;
  data.tokens = random_ids(37, 9);
  data.original_tokens = 20;
  for (std::int64_t stride : {1, 3, 8}) {
    const std::int64_t T = std::ssize(data.tokens);
    const std::int64_t windows = lm_window_count(T, stride);
    std::vector<std::vector<std::int64_t>> samples;
    std::vector<std::vector<int>> masks;
    for (std::int64_t idx = 0; idx < windows; ++idx) {
      std::vector<std::int64_t> s;
      std::vector<int> mask;
      for (std::int64_t i = idx * stride; i < std::min(T, idx * stride + seq + 1); ++i) {
        s.push_back(data.tokens[static_cast<std::size_t>(i)]);
        mask.push_back(1);
      }
      while (std::ssize(s) < seq + 1) {
        s.push_back(kEod);
        mask.push_back(0);
      }
      mask.erase(mask.begin());
      if (stride != seq && idx != 0) std::fill(mask.begin(), mask.end() - stride, 0);
      samples.push_back(s);
      masks.push_back(mask);
    }
    const Literal lit = megatron_forward(*model, samples, seq);
    double loss_sum = 0;
    for (std::size_t p = 0; p < lit.losses.size(); ++p)
      if (masks[p / static_cast<std::size_t>(seq)][p % static_cast<std::size_t>(seq)]) loss_sum += lit.losses[p];

    GptModelScorer scorer(*model);
    const WikitextResult r = evaluate_wikitext(data, scorer, {seq, stride, 3, kEod});
    INFO("stride " << stride);
    CHECK(r.windows == windows);
    CHECK(r.scored_targets == T - 1);
    CHECK(r.loss_sum == Approx(loss_sum).epsilon(1e-5));
  }
}

TEST_CASE("run_eval end to end on a saved checkpoint: JSON result file", "[eval]") {
  const std::string dir = test::scratch_dir("eval-run");
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  auto model = tiny_model(backend);
  save_model_checkpoint(dir + "/ckpt", 7, model->parameters(), model_args_json(tiny_config()),
                        "{\"tokenizer_type\": \"NullTokenizer\", \"vocab_size\": 30}");
  std::ofstream(dir + "/lambada.jsonl") << "{\"text\": \"1 2 3 4\"}\n{\"text\": \"5 6 7 8 9 10 11 12 13 14 15\"}\n";
  std::ofstream(dir + "/test.wiki.tokens") << "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20";

  EvalOptions lambada;
  lambada.task = ZeroShotTask::kLambada;
  lambada.valid_data = dir + "/lambada.jsonl";
  lambada.load = dir + "/ckpt";
  lambada.micro_batch_size = 2;
  lambada.output = dir + "/lambada.json";
  REQUIRE(run_eval(lambada) == 0);
  const std::string l = read_text(*lambada.output);
  CHECK(l.find("\"examples\": 2") != std::string::npos);
  CHECK(l.find("\"truncated\": 1") != std::string::npos);  // 11 tokens > seq 8 + 1
  CHECK(l.find("\"target_tokens\": 2") != std::string::npos);
  CHECK(l.find("\"iteration\": 7") != std::string::npos);
  CHECK(l.find("\"type\": \"NullTokenizer\"") != std::string::npos);

  EvalOptions wiki = lambada;
  wiki.task = ZeroShotTask::kWikitext103;
  wiki.valid_data = dir + "/test.wiki.tokens";
  wiki.overlapping_eval = 4;
  wiki.output = dir + "/wiki.json";
  REQUIRE(run_eval(wiki) == 0);
  const std::string w = read_text(*wiki.output);
  CHECK(w.find("\"original_tokens\": 20") != std::string::npos);
  CHECK(w.find("\"detokenized_tokens\": 20") != std::string::npos);
  CHECK(w.find("\"windows\": 5") != std::string::npos);  // ceil((19 - 4) / 4) + 1
  CHECK(w.find("\"scored_targets\": 19") != std::string::npos);
  CHECK(w.find("\"token_ratio\": 1.0") != std::string::npos);

  wiki.seq_length = 11;  // learned positions: at most max-position-embeddings (10)
  CHECK_THROWS_WITH(run_eval(wiki), Catch::Contains("max-position-embeddings"));
  wiki.seq_length = 3;  // stride 4 > 3
  CHECK_THROWS_WITH(run_eval(wiki), Catch::Contains("--overlapping-eval 4 exceeds --seq-length 3"));
  wiki.seq_length.reset();
  wiki.model_flags = {{"hidden-size", "32"}};
  CHECK_THROWS_WITH(run_eval(wiki), Catch::Contains("--hidden-size 32 disagrees"));
  wiki.model_flags.clear();
  wiki.checkpoint_flags.make_vocab_size_divisible_by = 64;
  CHECK_THROWS_WITH(run_eval(wiki), Catch::Contains("pads the vocabulary to 64"));
  wiki.checkpoint_flags.make_vocab_size_divisible_by = 8;  // 31 → 32
  CHECK(run_eval(wiki) == 0);
  wiki.load = dir + "/none";
  CHECK_THROWS_WITH(run_eval(wiki), Catch::Contains("no such directory"));
}
