#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <random>

#include "kernels/backend_factory.hpp"
#include "model_testing.hpp"

using namespace mgt;
using namespace mgt::model_testing;

namespace {

// Elements to check in a tensor: all of a small one, a fixed random sample of a large one.
std::vector<size_t> sample_elements(int64_t numel, uint32_t seed) {
  constexpr int64_t kMaxChecked = 48;
  std::vector<size_t> idx(static_cast<size_t>(numel));
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  if (numel > kMaxChecked) {
    std::mt19937 gen(seed);
    std::shuffle(idx.begin(), idx.end(), gen);
    idx.resize(kMaxChecked);
  }
  return idx;
}

// The model's analytic gradients (fp32) against central differences of the fp64 reference loss,
// tensor by tensor. Returns the largest per-tensor relative error ‖g − fd‖ / ‖fd‖.
double check_gradients(const GptConfig& config, uint32_t seed) {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(config, backend, seed);
  GptParameters& params = model.parameters();
  randomize_parameters(params, seed);
  const RefBatch batch = random_batch(config, 2, config.seq_length, seed + 1);
  model.forward_backward(micro_batch(batch), {}, 1);

  RefParams ref = read_params(params);
  const double step = 1e-5;
  double worst = 0.0;
  std::string worst_name;
  for (const ParameterEntry& e : params.entries()) {
    const std::vector<float> grad = params.read_grad(e);
    if (e.name.ends_with(".k_layernorm.bias")) {
      // The same vector added to every key shifts each query's scores by one constant, which the
      // softmax removes: the loss does not depend on this bias, and its gradient is rounding.
      for (const float g : grad) REQUIRE(std::abs(g) < 1e-6f);
      continue;
    }
    std::vector<double>& values = ref[e.name];
    double diff2 = 0.0;
    double norm2 = 0.0;
    for (const size_t i : sample_elements(e.numel(), seed + static_cast<uint32_t>(e.offset))) {
      const double saved = values[i];
      values[i] = saved + step;
      const double up = reference_forward(config, ref, batch).loss;
      values[i] = saved - step;
      const double down = reference_forward(config, ref, batch).loss;
      values[i] = saved;
      const double fd = (up - down) / (2.0 * step);
      diff2 += (grad[i] - fd) * (grad[i] - fd);
      norm2 += fd * fd;
    }
    INFO(e.name << ": |fd| = " << std::sqrt(norm2) << ", |g - fd| = " << std::sqrt(diff2));
    REQUIRE(norm2 > 1e-12);  // every tensor takes part in the loss
    const double rel = std::sqrt(diff2 / norm2);
    CHECK(rel < 1e-4);
    if (rel > worst) {
      worst = rel;
      worst_name = e.name;
    }
  }
  std::printf("  gradient check (%s, %s, %s): max per-tensor rel err %.2e (%s)\n",
              std::string(to_string(config.normalization)).c_str(),
              std::string(to_string(config.activation)).c_str(),
              std::string(to_string(config.position_embedding_type)).c_str(), worst,
              worst_name.c_str());
  return worst;
}

}  // namespace

TEST_CASE("GPT gradients match finite differences: LayerNorm, GELU, learned positions, tied",
          "[model]") {
  CHECK(check_gradients(gpt2_like_config(), 21) < 1e-4);
}

TEST_CASE("GPT gradients match finite differences: RMSNorm, SwiGLU, partial RoPE, GQA, untied",
          "[model]") {
  CHECK(check_gradients(llama_like_config(), 22) < 1e-4);
}

TEST_CASE("GPT gradients match finite differences: query and key norms (--qk-layernorm)", "[model]") {
  CHECK(check_gradients(with_qk_layernorm(gpt2_like_config()), 24) < 1e-4);
  CHECK(check_gradients(with_qk_layernorm(llama_like_config()), 25) < 1e-4);
}

TEST_CASE("GPT gradients match finite differences: tanh GELU, three layers", "[model]") {
  CHECK(check_gradients(openai_gelu_config(), 23) < 1e-4);
}

TEST_CASE("GPT gradients match finite differences: squared ReLU (--squared-relu)", "[model]") {
  GptConfig c = gpt2_like_config();
  c.activation = Activation::kSquaredRelu;
  CHECK(check_gradients(c, 26) < 1e-4);
}

TEST_CASE("GPT gradients of several micro-batches add up to the gradient of their mean loss",
          "[model]") {
  const GptConfig c = llama_like_config();
  const RefBatch first = random_batch(c, 2, 8, 1);
  const RefBatch second = random_batch(c, 2, 8, 2);

  // Separately, each as the only micro-batch of an iteration.
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(c, backend, 3);
  randomize_parameters(model.parameters(), 3);
  model.forward_backward(micro_batch(first), {}, 1);
  const std::vector<float> g1 = read_all_grads(model.parameters());
  model.parameters().zero_grads();
  model.forward_backward(micro_batch(second), {}, 1);
  const std::vector<float> g2 = read_all_grads(model.parameters());

  // Together, as two micro-batches: the gradient of (loss1 + loss2) / 2.
  model.parameters().zero_grads();
  const LossSum l1 = model.forward_backward(micro_batch(first), {}, 2);
  const LossSum l2 = model.forward_backward(micro_batch(second), {}, 2);
  const std::vector<float> both = read_all_grads(model.parameters());

  std::vector<double> want(both.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = 0.5 * (g1[i] + g2[i]);
  CHECK(kernel_testing::rel_error(both, want) < 1e-6);
  CHECK(l1.token_count == 13.0);
  CHECK(l2.token_count == 13.0);
}

TEST_CASE("GPT micro-batch with an all-zero loss mask contributes no gradient", "[model]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(gpt2_like_config(), backend, 3);
  RefBatch batch = random_batch(gpt2_like_config(), 1, 4, 1);
  std::fill(batch.loss_mask.begin(), batch.loss_mask.end(), 0.0f);
  const LossSum sum = model.forward_backward(micro_batch(batch), {}, 1);
  CHECK(sum.token_count == 0.0);
  CHECK(backend.sum_of_squares(model.parameters().grads()) == 0.0);
}
