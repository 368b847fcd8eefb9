// The expert bias of aux-loss-free load balancing (model/moe_expert_bias.hpp): Megatron's update
// rule (get_updated_expert_bias) on a hand-computed example, the bias steering the top-k choice
// but not the gates, and the counts a training forward adds and the update consumes.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/backend_factory.hpp"
#include "model/moe_expert_bias.hpp"

using namespace mgt;

TEST_CASE("update_expert_bias moves each bias by the rate towards the mean count", "[moe][expert_bias]") {
  // Counts 6, 2, 4, 4: mean 4. Expert 0 is above it (bias − rate), expert 1 below (+ rate),
  // experts 2 and 3 at it (unchanged, sign 0).
  std::vector<float> bias = {0.5f, -0.25f, 0.0f, 1.0f};
  const std::vector<float> counts = {6.0f, 2.0f, 4.0f, 4.0f};
  update_expert_bias(bias, counts, 0.125);
  CHECK(bias == std::vector<float>{0.375f, -0.125f, 0.0f, 1.0f});
  // Scaling every count alike (the same tokens counted on several ranks) changes nothing.
  std::vector<float> scaled = {0.5f, -0.25f, 0.0f, 1.0f};
  update_expert_bias(scaled, std::vector<float>{12.0f, 4.0f, 8.0f, 8.0f}, 0.125);
  CHECK(scaled == bias);
  std::vector<float> one = {0.0f};
  CHECK_THROWS(update_expert_bias(one, counts, 0.1));
}

TEST_CASE("the expert bias chooses the experts and leaves the gates to the scores", "[moe][expert_bias]") {
  const std::unique_ptr<Backend> backend = make_backend("cpu");
  // One token, 4 experts, top-2, sigmoid: logits 2, 1, 0, −1 choose experts 0 and 1; a bias of
  // +3 on expert 3 chooses 0 and 3, whose gates are their sigmoids normalised without the bias.
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f, -1.0f};
  MoeRoutingParams p;
  p.tokens = 1;
  p.experts = 4;
  p.topk = 2;
  p.sigmoid = true;
  DeviceBuffer in(*backend, 4, FloatType::kF32), gates(*backend, 4, FloatType::kF32),
      probs(*backend, 4, FloatType::kF32), map(*backend, 4, FloatType::kF32);
  DeviceArray<double> statistics(*backend, 2);
  backend->copy_from_host(std::span<const float>(logits), in.view());
  auto route = [&] {
    backend->moe_route(in.view(), p, gates.view(), probs.view(), map.view(), FloatView(), statistics.view(), false);
    std::vector<float> m(4), g(4);
    backend->copy_to_host(map.view(), m);
    backend->copy_to_host(probs.view(), g);
    return std::pair{m, g};
  };
  const auto [plain_map, plain_probs] = route();
  CHECK(plain_map == std::vector<float>{1, 1, 0, 0});
  const std::vector<float> bias = {0.0f, 0.0f, 0.0f, 3.0f};
  p.expert_bias = bias.data();  // the CPU backend's memory is the host's
  const auto [biased_map, biased_probs] = route();
  CHECK(biased_map == std::vector<float>{1, 0, 0, 1});
  const float s0 = 1.0f / (1.0f + std::exp(-2.0f));
  const float s3 = 1.0f / (1.0f + std::exp(1.0f));
  CHECK(biased_probs[0] == Approx(s0 / (s0 + s3)).epsilon(1e-6));
  CHECK(biased_probs[3] == Approx(s3 / (s0 + s3)).epsilon(1e-6));
  CHECK(biased_probs[1] == 0.0f);
}

TEST_CASE("MoeExpertBias holds the biases of the stage's MoE layers and updates them from the counts",
          "[moe][expert_bias]") {
  const std::unique_ptr<Backend> backend = make_backend("cpu");
  MoeConfig moe;
  moe.num_experts = 4;
  moe.layer_pattern = {false, true, true, true};
  moe.enable_expert_bias = true;
  moe.bias_update_rate = 0.5;
  // The second of two pipeline stages: layers 2 and 3.
  PipelineStage stage;
  stage.size = 2;
  stage.rank = 1;
  stage.first_layer = 2;
  stage.num_layers = 2;
  MoeExpertBias bias(moe, 4, stage, *backend);
  REQUIRE(bias.layers() == std::vector<std::int64_t>{2, 3});
  CHECK(bias.bias(1) == nullptr);
  CHECK(bias.tokens_per_expert(0).empty());
  CHECK(MoeExpertBias::name(3) == "decoder.layers.3.mlp.router.expert_bias");
  CHECK(bias.read(2) == std::vector<float>(4, 0.0f));

  // Two micro-batches' routing maps of layer 3 (3 tokens, top-1), counted as a router counts them.
  const std::vector<float> map = {1, 0, 0, 0,  1, 0, 0, 0,  0, 1, 0, 0};
  DeviceBuffer device_map(*backend, 12, FloatType::kF32);
  backend->copy_from_host(std::span<const float>(map), device_map.view());
  for (int micro = 0; micro < 2; ++micro) backend->bias_backward(device_map.view(), 3, 4, bias.tokens_per_expert(3));
  bias.write(2, std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f});
  bias.update(nullptr);
  // Layer 3: counts 4, 2, 0, 0 (mean 1.5). Layer 2 routed nothing: every count at the mean.
  CHECK(bias.read(3) == std::vector<float>{-0.5f, -0.5f, 0.5f, 0.5f});
  CHECK(bias.read(2) == std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f});
  std::vector<float> counts(4);
  backend->copy_to_host(ConstFloatView(bias.tokens_per_expert(3)), counts);
  CHECK(counts == std::vector<float>(4, 0.0f));
  std::vector<float> device_bias(4);
  backend->copy_to_host(ConstFloatView(bias.bias(3), 4), device_bias);
  CHECK(device_bias == bias.read(3));

  moe.enable_expert_bias = false;
  CHECK_FALSE(MoeExpertBias(moe, 4, {}, *backend).enabled());
}
