// --log-params-norm, --log-num-zeros-in-grad and --decoupled-lr at the optimizer: what Megatron's
// calc_params_l2_norm, count_zeros_fp32 and its decoupled parameter groups compute.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "kernels/backend_factory.hpp"
#include "train/adamw_optimizer.hpp"
#include "train/params_norm.hpp"

using namespace mgt;

namespace {

GptConfig tiny_config() {
  GptConfig config;
  config.num_layers = 1;
  config.hidden_size = 8;
  config.num_attention_heads = 2;
  config.seq_length = 4;
  config.padded_vocab_size = 16;
  return config;
}

}  // namespace

TEST_CASE("gradient statistics: the parameters' L2 norm over the tensors, gaps left out", "[train]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptParameters params(tiny_config(), backend);
  params.initialize(11);
  double sum = 0.0;
  for (const ParameterEntry& e : params.entries())
    for (float v : params.read_param(e)) sum += static_cast<double>(v) * v;
  CHECK(params_l2_norm(params, nullptr) == Approx(std::sqrt(sum)).epsilon(1e-12));
}

TEST_CASE("gradient statistics: zeros in the clipped gradients, tensor elements only", "[train]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptParameters params(tiny_config(), backend);
  params.initialize(11);
  AdamWOptimizer optimizer(params, AdamWSettings{0.9, 0.999, 1e-8, 0.5});
  // Every other tensor's gradient zero, the others 1 but for one zero element each; the
  // alignment gaps (zero) are not elements.
  double expected = 0.0;
  bool zero_tensor = true;
  for (const ParameterEntry& e : params.entries()) {
    std::vector<float> g(static_cast<std::size_t>(e.numel()), zero_tensor ? 0.0f : 1.0f);
    g[0] = 0.0f;
    expected += zero_tensor ? static_cast<double>(e.numel()) : 1.0;
    backend.copy_from_host(g, params.grad(e));
    zero_tensor = !zero_tensor;
  }
  REQUIRE(params.grads().size() > params.num_local_elements());  // there are gaps
  StepRequest request;
  request.lr = 1e-3;
  request.count_zeros = true;
  const OptimizerStep step = optimizer.step(request);
  REQUIRE(step.applied);
  CHECK(step.grad_norm > 0.5);  // clipped, which keeps the zeros
  REQUIRE(step.num_zeros);
  CHECK(*step.num_zeros == expected);

  // Not asked: not counted.
  CHECK_FALSE(optimizer.step(1e-3, 0.0).num_zeros);
}

TEST_CASE("gradient statistics: --decoupled-lr steps the word embedding and output layer at their own rate",
          "[train]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptConfig config = tiny_config();
  config.untie_embeddings_and_output_weights = true;
  GptParameters params(config, backend);
  params.initialize(3);
  AdamWOptimizer optimizer(params, AdamWSettings{});
  const std::vector<float> embedding = params.read_param(params.entry("embedding.word_embeddings.weight"));
  const std::vector<float> output = params.read_param(params.entry("output_layer.weight"));
  const std::vector<float> qkv = params.read_param(params.entry("decoder.layers.0.self_attention.linear_qkv.weight"));
  // Zero gradients: the update is the decay p · (1 − lr · wd), with each group's lr.
  StepRequest request;
  request.lr = 0.1;
  request.decoupled_lr = 0.2;
  request.weight_decay = 0.5;
  REQUIRE(optimizer.step(request).applied);
  CHECK(params.read_param(params.entry("embedding.word_embeddings.weight"))[3] ==
        Approx(embedding[3] * (1.0f - 0.2f * 0.5f)));
  CHECK(params.read_param(params.entry("output_layer.weight"))[5] == Approx(output[5] * (1.0f - 0.2f * 0.5f)));
  CHECK(params.read_param(params.entry("decoder.layers.0.self_attention.linear_qkv.weight"))[7] ==
        Approx(qkv[7] * (1.0f - 0.1f * 0.5f)));
  CHECK(is_embedding_or_output_parameter(params.entry("output_layer.weight")));
  CHECK_FALSE(is_embedding_or_output_parameter(params.entry("embedding.position_embeddings.weight")));
}
