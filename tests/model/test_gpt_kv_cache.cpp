// The key/value-cached forward used by generation against the plain forward over whole
// sequences: the logits at every position must agree, whichever way the sequence is cut into
// cached chunks.
#include <catch2/catch.hpp>
#include <cstdio>
#include <vector>

#include "kernels/backend_factory.hpp"
#include "model/kv_cache.hpp"
#include "model_testing.hpp"

using namespace mgt;
using namespace mgt::model_testing;

namespace {

// Tokens [b, s] with positions 0…s−1 in every row.
std::vector<int64_t> random_tokens(const GptConfig& config, int64_t b, int64_t s, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int64_t> tokens(static_cast<size_t>(b * s));
  for (auto& t : tokens) t = static_cast<int64_t>(gen() % static_cast<uint32_t>(config.padded_vocab_size));
  return tokens;
}

// Rows [b, first, first + n) of a [b, s] array.
std::vector<int64_t> columns(const std::vector<int64_t>& x, int64_t b, int64_t s, int64_t first, int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = first; j < first + n; ++j) out.push_back(x[static_cast<size_t>(i * s + j)]);
  return out;
}

// Feeds the sequence in the given chunk sizes and compares the logits after each chunk with the
// full forward's at that position. Returns the largest error relative to the largest logit.
double cached_vs_full(const GptConfig& config, const std::vector<int64_t>& chunks, uint32_t seed) {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(config, backend, seed);
  randomize_parameters(model.parameters(), seed);
  const int64_t b = 3;
  int64_t s = 0;
  for (int64_t n : chunks) s += n;
  const std::vector<int64_t> tokens = random_tokens(model.config(), b, s, seed + 1);
  MicroBatch full;
  full.batch_size = b;
  full.seq_length = s;
  full.tokens = tokens;
  const std::vector<float> want = model.forward_only(full, true).logits;  // [b, s, V]
  const int64_t vocab = model.config().padded_vocab_size;
  double scale = 0.0;
  for (float v : want) scale = std::max(scale, static_cast<double>(std::abs(v)));

  KvCache cache(backend, model.config(), b, s + 2);
  double worst = 0.0;
  int64_t done = 0;
  for (int64_t n : chunks) {
    const std::vector<float> got = model.forward_cached(columns(tokens, b, s, done, n), n, cache);
    done += n;
    REQUIRE(cache.length() == done);
    for (int64_t i = 0; i < b; ++i)
      for (int64_t v = 0; v < vocab; ++v) {
        const double w = want[static_cast<size_t>((i * s + done - 1) * vocab + v)];
        const double g = got[static_cast<size_t>(i * vocab + v)];
        worst = std::max(worst, std::abs(g - w) / scale);
      }
  }
  std::printf("  cached vs full forward (%s, %s): max error %.2e of the largest logit\n",
              std::string(to_string(config.position_embedding_type)).c_str(),
              std::string(to_string(config.activation)).c_str(), worst);
  return worst;
}

}  // namespace

TEST_CASE("KV-cached forward equals the full forward: learned positions, GELU, MHA", "[model]") {
  GptConfig c = gpt2_like_config();
  CHECK(cached_vs_full(c, {4, 1, 1, 1, 2, 1}, 11) < 1e-5);
  CHECK(cached_vs_full(c, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 12) < 1e-5);
}

TEST_CASE("KV-cached forward equals the full forward: RoPE, SwiGLU, GQA, RMSNorm", "[model]") {
  CHECK(cached_vs_full(llama_like_config(), {5, 1, 1, 1}, 13) < 1e-5);
  CHECK(cached_vs_full(llama_like_config(), {1, 3, 1, 4}, 14) < 1e-5);
}

TEST_CASE("KV-cached forward equals the full forward: query and key norms", "[model]") {
  CHECK(cached_vs_full(with_qk_layernorm(llama_like_config()), {3, 1, 2, 1}, 15) < 1e-5);
}

TEST_CASE("KV-cached forward equals the full forward: Mixture of Experts", "[model][moe]") {
  // Every token is routed by itself, so a cached step routes as the whole sequence does: top-2
  // of 4 experts, a dense layer before a sparse one, and Mixtral's shape (every layer sparse).
  GptConfig c = llama_like_config();
  c.moe.num_experts = 4;
  c.moe.topk = 2;
  c.moe.ffn_hidden_size = 12;
  c.moe.layer_pattern = {false, true};
  c.moe.shared_expert_intermediate_size = 8;
  CHECK(cached_vs_full(c, {5, 1, 1, 1}, 15) < 1e-5);
  c.moe.layer_pattern = {true, true};
  c.moe.shared_expert_intermediate_size = 0;
  CHECK(cached_vs_full(c, {1, 1, 1, 1, 1, 1, 1, 1}, 16) < 1e-5);
  c.moe.pre_softmax = true;
  c.moe.topk = 1;
  CHECK(cached_vs_full(c, {3, 2, 1, 1, 1}, 17) < 1e-5);
}

TEST_CASE("KV-cached forward refuses positions past the cache and the position table", "[model]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  const GptConfig c = gpt2_like_config();  // max_position_embeddings 10
  GptModel model(c, backend, 1);
  KvCache small(backend, model.config(), 1, 4);
  const std::vector<int64_t> three = {1, 2, 3};
  model.forward_cached(three, 3, small);
  CHECK_THROWS_WITH(model.forward_cached(std::vector<int64_t>{1, 2}, 2, small),
                    Catch::Contains("key/value cache holds 4 positions"));
  KvCache large(backend, model.config(), 1, 20);
  const std::vector<int64_t> ten(10, 1);
  model.forward_cached(ten, 10, large);
  CHECK_THROWS_WITH(model.forward_cached(std::vector<int64_t>{1}, 1, large),
                    Catch::Contains("--max-position-embeddings 10"));
}

TEST_CASE("KV-cached greedy step picks the first largest logit of the true vocabulary", "[model]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  const GptConfig c = llama_like_config();
  GptModel model(c, backend, 5);
  randomize_parameters(model.parameters(), 5);
  const int64_t b = 3, vocab = c.padded_vocab_size - 5;
  const std::vector<int64_t> tokens = random_tokens(model.config(), b, 6, 6);
  KvCache by_logits(backend, model.config(), b, 8);
  KvCache greedy(backend, model.config(), b, 8);
  for (int64_t done = 0; done < 6; done += 2) {
    const std::vector<int64_t> chunk = columns(tokens, b, 6, done, 2);
    const std::vector<float> logits = model.forward_cached(chunk, 2, by_logits);
    const std::vector<int64_t> picked = model.forward_cached_greedy(chunk, 2, greedy, vocab);
    REQUIRE(picked.size() == static_cast<size_t>(b));
    for (int64_t i = 0; i < b; ++i) {
      const auto row = logits.begin() + i * c.padded_vocab_size;
      CHECK(picked[static_cast<size_t>(i)] == std::max_element(row, row + vocab) - row);
    }
  }
  CHECK(greedy.length() == 6);
  CHECK_THROWS_WITH(model.forward_cached_greedy(columns(tokens, b, 6, 0, 1), 1, greedy, c.padded_vocab_size + 1),
                    Catch::Contains("vocabulary to pick from"));
}
