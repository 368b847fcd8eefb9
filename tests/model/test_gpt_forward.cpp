#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <utility>

#include "kernels/backend_factory.hpp"
#include "model_testing.hpp"

using namespace mgt;
using namespace mgt::model_testing;

namespace {

struct ForwardErrors {
  double loss = 0.0;
  double logits = 0.0;
  double losses = 0.0;
};

// Model (fp32) against the fp64 reference on the same random parameters.
ForwardErrors compare_with_reference(const GptConfig& config, uint32_t seed) {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(config, backend, seed);
  randomize_parameters(model.parameters(), seed);
  const RefBatch batch = random_batch(config, 2, config.seq_length, seed + 100);

  const ForwardOutput got = model.forward_only(micro_batch(batch), true);
  const RefOutput want = reference_forward(config, read_params(model.parameters()), batch);

  ForwardErrors e;
  e.loss = std::abs(got.loss.loss_sum / got.loss.token_count - want.loss) / std::abs(want.loss);
  e.logits = kernel_testing::max_rel_error(got.logits, want.logits);
  e.losses = kernel_testing::max_rel_error(got.losses, want.losses);
  std::printf(
      "  forward vs fp64 reference (%s, %s, %s): loss rel err %.2e, logits max rel err "
      "%.2e\n",
      std::string(to_string(config.normalization)).c_str(),
      std::string(to_string(config.activation)).c_str(),
      std::string(to_string(config.position_embedding_type)).c_str(), e.loss, e.logits);
  return e;
}

}  // namespace

TEST_CASE("GPT forward matches the fp64 reference: LayerNorm, GELU, learned positions, tied",
          "[model]") {
  const ForwardErrors e = compare_with_reference(gpt2_like_config(), 11);
  CHECK(e.loss < 1e-5);
  CHECK(e.logits < 1e-5);
  CHECK(e.losses < 1e-5);
}

TEST_CASE("GPT forward matches the fp64 reference: RMSNorm, SwiGLU, partial RoPE, GQA, untied",
          "[model]") {
  const ForwardErrors e = compare_with_reference(llama_like_config(), 12);
  CHECK(e.loss < 1e-5);
  CHECK(e.logits < 1e-5);
  CHECK(e.losses < 1e-5);
}

TEST_CASE("GPT forward matches the fp64 reference: query and key norms (--qk-layernorm)", "[model]") {
  for (const GptConfig& config : {with_qk_layernorm(gpt2_like_config()), with_qk_layernorm(llama_like_config())}) {
    const ForwardErrors e = compare_with_reference(config, 14);
    CHECK(e.loss < 1e-5);
    CHECK(e.logits < 1e-5);
    CHECK(e.losses < 1e-5);
  }
}

TEST_CASE("GPT forward matches the fp64 reference: tanh GELU", "[model]") {
  const ForwardErrors e = compare_with_reference(openai_gelu_config(), 13);
  CHECK(e.loss < 1e-5);
  CHECK(e.logits < 1e-5);
}

TEST_CASE("GPT forward matches the fp64 reference: squared ReLU (--squared-relu)", "[model]") {
  GptConfig c = gpt2_like_config();
  c.activation = Activation::kSquaredRelu;
  const ForwardErrors e = compare_with_reference(c, 15);
  CHECK(e.loss < 1e-5);
  CHECK(e.logits < 1e-5);
}

TEST_CASE("GPT forward with full rotary and shorter sequences than seq_length", "[model]") {
  GptConfig c = llama_like_config();
  c.rotary_percent = 1.0;
  c.add_bias_linear = true;
  c.normalization = Normalization::kLayerNorm;
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(c, backend, 5);
  randomize_parameters(model.parameters(), 5);
  const RefBatch batch = random_batch(c, 3, 5, 77);
  const ForwardOutput got = model.forward_only(micro_batch(batch), true);
  const RefOutput want = reference_forward(c, read_params(model.parameters()), batch);
  CHECK(kernel_testing::max_rel_error(got.logits, want.logits) < 1e-5);
}

TEST_CASE("GPT at Megatron's initialisation predicts a near-uniform distribution", "[model]") {
  GptConfig c = gpt2_like_config();
  c.hidden_size = 32;
  c.padded_vocab_size = 64;
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(c, backend, 1234);
  const RefBatch batch = random_batch(c, 2, 8, 3);
  const ForwardOutput out = model.forward_only(micro_batch(batch));
  // σ = 0.02 weights make the logits nearly equal: the loss is close to ln V.
  CHECK(out.loss.loss_sum / out.loss.token_count == Approx(std::log(64.0)).epsilon(0.01));
  // The mask has zeros at every fifth token.
  CHECK(out.loss.token_count == 13.0);
}

TEST_CASE("GPT forward_only and forward_backward agree on the loss without dropout", "[model]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(llama_like_config(), backend, 9);
  randomize_parameters(model.parameters(), 9);
  const RefBatch batch = random_batch(llama_like_config(), 2, 8, 4);
  const ForwardOutput eval = model.forward_only(micro_batch(batch));
  const LossSum train = model.forward_backward(micro_batch(batch), {1, 0}, 1);
  CHECK(train.loss_sum == eval.loss.loss_sum);
  CHECK(train.token_count == eval.loss.token_count);
}

TEST_CASE("GPT built for inference holds no gradients and computes the same forward", "[model]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel trained(llama_like_config(), backend, 9);
  randomize_parameters(trained.parameters(), 9);
  GptModel inference(llama_like_config(), backend, std::nullopt, {}, {}, {}, ParameterUse::kInference);
  for (const ParameterEntry& e : trained.parameters().entries())
    inference.parameters().write_param(e, trained.parameters().read_param(e));
  CHECK(inference.parameters().grads().empty());
  CHECK_THROWS_WITH(inference.parameters().zero_grads(), Catch::Contains("built for inference"));
  const RefBatch batch = random_batch(llama_like_config(), 2, 8, 4);
  const ForwardOutput a = trained.forward_only(micro_batch(batch), true);
  const ForwardOutput b = inference.forward_only(micro_batch(batch), true);
  CHECK(a.loss.loss_sum == b.loss.loss_sum);
  CHECK(a.logits == b.logits);
  CHECK_THROWS_WITH(inference.forward_backward(micro_batch(batch), {1, 0}, 1), Catch::Contains("built for inference"));
}

TEST_CASE("GPT built for inference in bf16 keeps only the bf16 copy and computes the same forward", "[model]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  backend.set_activation_type(FloatType::kBf16);
  for (const bool zero_centered : {false, true}) {
    GptConfig config = llama_like_config();
    config.layernorm_zero_centered_gamma = zero_centered;  // its forward reads the fp32 weights
    GptModel trained(config, backend, 9);
    randomize_parameters(trained.parameters(), 9);
    GptModel inference(config, backend, std::nullopt, {}, {}, {}, ParameterUse::kInference);
    for (const ParameterEntry& e : trained.parameters().entries())
      inference.parameters().write_param(e, trained.parameters().read_param(e));
    CHECK(inference.parameters().compute_only() == !zero_centered);
    CHECK(std::as_const(inference.parameters()).params().empty() == !zero_centered);
    if (!zero_centered) {
      CHECK_THROWS_WITH(inference.parameters().params(), Catch::Contains("not kept"));
      // Read back from the bf16 copy: the weights rounded to bf16.
      const ParameterEntry& e = trained.parameters().entries().front();
      const std::vector<float> kept = inference.parameters().read_param(e), given = trained.parameters().read_param(e);
      for (std::size_t i = 0; i < kept.size(); ++i) CHECK(std::fabs(kept[i] - given[i]) <= std::fabs(given[i]) * 0x1p-8f);
    }
    const RefBatch batch = random_batch(config, 2, 8, 4);
    const ForwardOutput a = trained.forward_only(micro_batch(batch), true);
    const ForwardOutput b = inference.forward_only(micro_batch(batch), true);
    CHECK(a.loss.loss_sum == b.loss.loss_sum);
    CHECK(a.logits == b.logits);
  }
}

TEST_CASE("GPT forward_only without labels returns logits only", "[model]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(gpt2_like_config(), backend, 9);
  RefBatch batch = random_batch(gpt2_like_config(), 1, 4, 4);
  MicroBatch m = micro_batch(batch);
  m.labels = {};
  m.loss_mask = {};
  const ForwardOutput out = model.forward_only(m, true);
  CHECK(out.losses.empty());
  CHECK(out.loss.token_count == 0.0);
  CHECK(out.logits.size() == 4u * 32u);
}

TEST_CASE("GPT forward_only returns each position's argmax, the first of equal maxima", "[model]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(gpt2_like_config(), backend, 9);
  randomize_parameters(model.parameters(), 9);
  const RefBatch batch = random_batch(gpt2_like_config(), 3, 8, 4);
  const ForwardOutput out = model.forward_only(micro_batch(batch), true, true);
  const int64_t vocab = model.config().padded_vocab_size;
  REQUIRE(out.argmax.size() == 3u * 8u);
  for (size_t p = 0; p < out.argmax.size(); ++p) {
    const auto row = out.logits.begin() + static_cast<std::ptrdiff_t>(p) * vocab;
    CHECK(out.argmax[p] == std::max_element(row, row + vocab) - row);
  }
  // Ties: a zeroed output layer (tied embedding) makes every logit 0, so id 0 wins.
  GptParameters& params = model.parameters();
  const ParameterEntry& words = params.entry("embedding.word_embeddings.weight");
  params.write_param(words, std::vector<float>(static_cast<size_t>(words.numel()), 0.0f));
  for (int64_t id : model.forward_only(micro_batch(batch), false, true).argmax) CHECK(id == 0);
}

TEST_CASE("GPT forward_selected equals forward_only at the selected positions", "[model]") {
  for (const GptConfig& config : {gpt2_like_config(), llama_like_config()}) {
    const auto backend_owner = make_backend("cpu");
    Backend& backend = *backend_owner;
    GptModel model(config, backend, 12);
    randomize_parameters(model.parameters(), 12);
    const RefBatch batch = random_batch(config, 3, 8, 6);  // loss mask with some zeros
    const ForwardOutput all = model.forward_only(micro_batch(batch), false, true);
    const ForwardOutput some = model.forward_selected(micro_batch(batch), true);
    for (size_t k = 0; k < batch.loss_mask.size(); ++k) {
      if (batch.loss_mask[k] == 0.0f) {
        CHECK(some.losses[k] == 0.0f);
        CHECK(some.argmax[k] == -1);
      } else {
        CHECK(some.losses[k] == Approx(all.losses[k]).epsilon(1e-6));
        CHECK(some.argmax[k] == all.argmax[k]);
      }
    }
    CHECK(some.loss.token_count == all.loss.token_count);
    CHECK(some.loss.loss_sum == Approx(all.loss.loss_sum).epsilon(1e-6));
  }
}

TEST_CASE("GPT rejects malformed micro-batches with a clear error", "[model]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(gpt2_like_config(), backend, 9);
  RefBatch batch = random_batch(gpt2_like_config(), 1, 4, 4);
  batch.tokens[2] = 32;  // == padded vocab
  CHECK_THROWS_WITH(model.forward_only(micro_batch(batch)),
                    Catch::Contains("tokens holds 32, outside [0, 32)"));
  batch = random_batch(gpt2_like_config(), 1, 4, 4);
  batch.labels.pop_back();
  CHECK_THROWS_WITH(model.forward_backward(micro_batch(batch), {}, 1),
                    Catch::Contains("labels has 3 elements, expected 4"));
  batch = random_batch(gpt2_like_config(), 1, 11, 4);  // longer than the 10 positions
  batch.positions.clear();
  CHECK_THROWS_WITH(model.forward_only(micro_batch(batch)),
                    Catch::Contains("exceeds --max-position-embeddings"));
}
