// The gradients' deferred zeroing (model/gradient_zeroing.hpp): an iteration's gradients do not
// depend on what the buffer held before it, for every writer of a parameter's gradient (linear
// layers, norms, the tied embedding and its output layer, experts that no token chose, the
// grouped experts), and the entries nobody writes are zero.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "kernels/backend_factory.hpp"
#include "model_testing.hpp"

using namespace mgt;
using namespace mgt::model_testing;

namespace {

// The gradients of batch `a` (one micro-batch, or a then b as two) after an iteration on
// `before` where given, from the same weights.
std::vector<float> gradients(const GptConfig& config, const std::optional<RefBatch>& before, const RefBatch& a,
                             const std::optional<RefBatch>& b = std::nullopt) {
  const std::unique_ptr<Backend> owner = make_backend("cpu");
  GptModel model(config, *owner, 7);
  GptParameters& params = model.parameters();
  randomize_parameters(params, 7);
  if (before) {
    params.zero_grads();
    model.forward_backward(micro_batch(*before), {5, 1}, 1);
  }
  params.zero_grads();
  model.forward_backward(micro_batch(a), {5, 2}, b ? 2 : 1);
  if (b) model.forward_backward(micro_batch(*b), {5, 3}, 2);
  return read_all_grads(params);
}

GptConfig with_experts(GptConfig c, int64_t experts, bool grouped) {
  c.add_bias_linear = false;
  c.moe.num_experts = experts;
  c.moe.topk = 1;
  c.moe.ffn_hidden_size = 12;
  c.moe.layer_pattern = std::vector<bool>(static_cast<size_t>(c.num_layers), true);
  c.moe.grouped_gemm = grouped;
  return c;
}

size_t elements_differing(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
  return differ;
}

// Bit for bit: the first write of each gradient is the same operation whatever the buffer held.
// Without experts, every parameter has a gradient (none of them was lost to a zeroing).
void check_independent_of_last_iteration(const GptConfig& config, int64_t batch) {
  const RefBatch a = random_batch(config, batch, 8, 11);
  const RefBatch b = random_batch(config, batch, 8, 13);
  const RefBatch before = random_batch(config, batch, 8, 12);
  const std::vector<float> fresh = gradients(config, std::nullopt, a);
  if (!config.moe.enabled()) {
    const std::unique_ptr<Backend> owner = make_backend("cpu");
    const GptParameters layout(config, *owner);
    for (const ParameterEntry& e : layout.entries()) {
      const auto first = fresh.begin() + e.offset;
      INFO(e.name);
      CHECK(std::any_of(first, first + e.numel(), [](float g) { return g != 0.0f; }));
    }
  }
  INFO("one micro-batch");
  CHECK(elements_differing(fresh, gradients(config, before, a)) == 0);
  INFO("two micro-batches: the first writes over, the second adds");
  CHECK(elements_differing(gradients(config, std::nullopt, a, b), gradients(config, before, a, b)) == 0);
}

}  // namespace

TEST_CASE("gradient zeroing: deferred entries are written over, the others filled", "[model]") {
  const std::unique_ptr<Backend> owner = make_backend("cpu");
  GptParameters params(gpt2_like_config(), *owner);
  const ParameterEntry& deferred = params.entry("decoder.layers.0.self_attention.linear_qkv.weight");
  const ParameterEntry& filled = params.entry("embedding.word_embeddings.weight");
  const ParameterEntry& unwritten = params.entry("decoder.layers.1.mlp.linear_fc2.bias");
  params.defer_grad_zeroing(deferred);
  params.defer_grad_zeroing(unwritten);
  owner->fill(params.grads(), 1.0f);
  params.zero_grads();
  const auto all_equal = [&](const ParameterEntry& e, float v) {
    const std::vector<float> g = params.read_grad(e);
    return std::all_of(g.begin(), g.end(), [&](float x) { return x == v; });
  };
  CHECK(all_equal(filled, 0.0f));
  CHECK(all_equal(deferred, 1.0f));  // left to its first write
  CHECK_FALSE(params.grad_write_accumulates(deferred));
  CHECK(params.grad_write_accumulates(deferred));
  CHECK(params.grad_write_accumulates(filled));
  // Settled: the deferred entry no write reached is zeroed, the written one is left alone.
  params.settle_grads();
  CHECK(all_equal(unwritten, 0.0f));
  CHECK(all_equal(deferred, 1.0f));
  CHECK(params.grad_write_accumulates(unwritten));
}

TEST_CASE("gradient zeroing: GPT-2 (tied embedding, biases, LayerNorm) and Llama shapes", "[model]") {
  check_independent_of_last_iteration(gpt2_like_config(), 2);
  check_independent_of_last_iteration(llama_like_config(), 2);
}

TEST_CASE("gradient zeroing: experts without tokens, expert by expert and grouped", "[model][moe]") {
  // Sixteen experts, one each for 8 tokens: at least half of them receive none in each iteration.
  check_independent_of_last_iteration(with_experts(gpt2_like_config(), 16, false), 1);
  check_independent_of_last_iteration(with_experts(gpt2_like_config(), 16, true), 1);
  check_independent_of_last_iteration(with_experts(llama_like_config(), 4, true), 2);
}
