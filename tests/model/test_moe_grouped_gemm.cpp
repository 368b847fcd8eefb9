// --moe-grouped-gemm (model/moe_experts.hpp): the local experts' projections as grouped backend
// operations, the activation once over all their rows, give the losses and gradients of the
// expert-by-expert loop over a few iterations of plain gradient descent, for each activation,
// with experts that receive no tokens, with dropped tokens, with moe_act recomputation, and
// with bf16 storage on the CPU. (On the CPU the grouped operations are the loop itself, group by
// group: the results agree exactly; on a GPU to rounding, the grouped GEMM's against the CPU's in
// tests/kernels/test_backend_operations.cpp.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend_factory.hpp"
#include "model_testing.hpp"

using namespace mgt;
using namespace mgt::model_testing;

namespace {

struct Iteration {
  double loss = 0.0;
  std::vector<float> grads;
};

struct Training {
  std::vector<Iteration> iterations;
};

// Three iterations of one micro-batch each, the weights moved against their gradients between them.
Training train(GptConfig config, bool grouped, FloatType storage, int64_t batch) {
  config.moe.grouped_gemm = grouped;
  const std::unique_ptr<Backend> owner = make_backend("cpu");
  Backend& backend = *owner;
  backend.set_activation_type(storage);
  GptModel model(config, backend, 7);
  GptParameters& params = model.parameters();
  randomize_parameters(params, 7);
  backend.scale(params.params(), 0.3f);
  Training t;
  for (uint32_t i = 0; i < 3; ++i) {
    params.zero_grads();
    const LossSum s = model.forward_backward(micro_batch(random_batch(config, batch, 8, 40 + i)), {5, 9 + i}, 1);
    Iteration it{s.loss_sum / s.token_count, read_all_grads(params)};
    std::vector<float> weights(static_cast<size_t>(params.params().size()));
    backend.copy_to_host(params.params(), weights);
    for (size_t j = 0; j < weights.size(); ++j) weights[j] -= 0.05f * it.grads[j];
    backend.copy_from_host(weights, params.params());
    t.iterations.push_back(std::move(it));
  }
  return t;
}

double max_relative_difference(const std::vector<float>& want, const std::vector<float>& got) {
  double scale = 0.0, diff = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
    diff = std::max(diff, std::fabs(static_cast<double>(want[i]) - got[i]));
  }
  return scale > 0.0 ? diff / scale : diff;
}

GptConfig with_experts(GptConfig c, int64_t experts, int64_t topk) {
  c.add_bias_linear = false;  // Megatron's MoE has no biases
  c.moe.num_experts = experts;
  c.moe.topk = topk;
  c.moe.ffn_hidden_size = 12;
  c.moe.layer_pattern = std::vector<bool>(static_cast<size_t>(c.num_layers), true);
  c.moe.aux_loss_coeff = 0.01;
  return c;
}

void check_same_training(const GptConfig& config, FloatType storage = FloatType::kF32, int64_t batch = 2) {
  const Training loop = train(config, false, storage, batch);
  const Training grouped = train(config, true, storage, batch);
  for (size_t i = 0; i < loop.iterations.size(); ++i) {
    INFO("iteration " << i + 1 << ": loss " << loop.iterations[i].loss << " expert by expert, "
                      << grouped.iterations[i].loss << " grouped");
    CHECK(std::fabs(grouped.iterations[i].loss - loop.iterations[i].loss) <= 1e-6 * std::fabs(loop.iterations[i].loss));
    CHECK(max_relative_difference(loop.iterations[i].grads, grouped.iterations[i].grads) <= 1e-6);
  }
}

}  // namespace

TEST_CASE("moe grouped gemm: SwiGLU experts train as the expert-by-expert loop", "[model][moe]") {
  check_same_training(with_experts(llama_like_config(), 4, 2));
}

TEST_CASE("moe grouped gemm: GELU experts, most of them without tokens", "[model][moe]") {
  // Sixteen experts, one each for 8 tokens: at least half of them receive none.
  check_same_training(with_experts(gpt2_like_config(), 16, 1), FloatType::kF32, 1);
}

TEST_CASE("moe grouped gemm: tanh GELU experts with dropped tokens", "[model][moe]") {
  GptConfig c = with_experts(openai_gelu_config(), 4, 2);
  c.moe.capacity_factor = 0.5;
  check_same_training(c);
}

TEST_CASE("moe grouped gemm: with moe_act recomputation", "[model][moe][recompute]") {
  GptConfig c = with_experts(llama_like_config(), 4, 2);
  c.recompute_granularity = RecomputeGranularity::kSelective;
  c.recompute_core_attention = false;
  c.recompute_moe_act = true;
  check_same_training(c);
}

TEST_CASE("moe grouped gemm: bf16 storage on the CPU, as --moe-grouped-gemm runs (it needs --bf16)",
          "[model][moe]") {
  check_same_training(with_experts(llama_like_config(), 4, 2), FloatType::kBf16);
}
