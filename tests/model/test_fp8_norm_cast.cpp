// The norms that write their output in FP8 for linear_qkv and linear_fc1 (model/norm_fp8_cast.hpp)
// against the same model with the norm writing bf16 and the linear layer casting it
// (Fp8Recipe::norm_casts off): a few training steps of bf16-storage FP8 models on the CPU give the
// same losses, gradients, parameters and FP8 state to the bit, and so does an evaluation pass.
#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/backend_factory.hpp"
#include "model/activation_memory.hpp"
#include "model/gpt_model.hpp"
#include "model/norm_fp8_cast.hpp"
#include "model_testing.hpp"

using namespace mgt;
using namespace mgt::model_testing;

namespace {

struct Run {
  std::vector<double> losses;
  double eval_loss = 0.0;
  std::vector<float> params;
  std::vector<float> grads;
  std::vector<Fp8Training::LinearState> fp8_state;
};

GptConfig fp8_config(GptConfig config, bool norm_casts) {
  Fp8Recipe recipe;
  recipe.backward_format = Fp8Format::kE5M2;  // hybrid
  recipe.amax_history_len = 4;
  recipe.amax_compute_algo = Fp8AmaxAlgo::kMax;
  recipe.norm_casts = norm_casts;
  config.fp8 = recipe;
  return config;
}

// Three training steps (plain SGD on the fp32 parameters, so that the weights' FP8 copies are
// made again each step) with bf16 activations, then an evaluation pass.
Run train(const GptConfig& config) {
  const auto backend = make_backend("cpu");
  backend->set_activation_type(FloatType::kBf16);
  GptModel model(config, *backend, 7);
  GptParameters& params = model.parameters();
  randomize_parameters(params, 7);
  backend->scale(params.params(), 0.3f);
  const RefBatch batch = random_batch(config, 2, config.seq_length, 11);
  Run run;
  for (int step = 0; step < 3; ++step) {
    params.zero_grads();
    run.losses.push_back(model.forward_backward(micro_batch(batch), DropoutRng{1234, 5}, 1).loss_sum);
    DeviceBuffer update(*backend, params.grads().size());
    backend->copy(params.grads(), update.view());
    backend->scale(update.view(), -0.05f);
    backend->accumulate(params.params(), update.view());
  }
  run.eval_loss = model.forward_only(micro_batch(batch)).loss.loss_sum;
  run.params.resize(static_cast<size_t>(params.params().size()));
  backend->copy_to_host(std::as_const(params).params(), run.params);
  run.grads = read_all_grads(params);
  run.fp8_state = model.fp8()->read_state();
  return run;
}

void check_same(const Run& fused, const Run& separate) {
  CHECK(fused.losses == separate.losses);
  CHECK(fused.eval_loss == separate.eval_loss);
  CHECK(fused.params == separate.params);
  CHECK(fused.grads == separate.grads);
  REQUIRE(fused.fp8_state.size() == separate.fp8_state.size());
  for (size_t k = 0; k < fused.fp8_state.size(); ++k) {
    INFO("linear layer " << k);
    CHECK(fused.fp8_state[k].forward_history == separate.fp8_state[k].forward_history);
    CHECK(fused.fp8_state[k].forward_scale == separate.fp8_state[k].forward_scale);
    CHECK(fused.fp8_state[k].backward_history == separate.fp8_state[k].backward_history);
    CHECK(fused.fp8_state[k].backward_scale == separate.fp8_state[k].backward_scale);
  }
}

void compare(const GptConfig& base) {
  const GptConfig fused = fp8_config(base, true);
  const NormFp8Casts casts = model_norm_fp8_casts(fused.resolved(), false);
  CHECK(casts.input_norm);
  CHECK(casts.pre_mlp_norm);
  check_same(train(fused), train(fp8_config(base, false)));
}

}  // namespace

TEST_CASE("fp8 norm casts: a LayerNorm model trains to the bit as with the separate casts", "[model][fp8]") {
  compare(gpt2_like_config());
}

TEST_CASE("fp8 norm casts: an RMSNorm model trains to the bit as with the separate casts", "[model][fp8]") {
  compare(llama_like_config());
}

TEST_CASE("fp8 norm casts: with the MLP recomputed, only the input norm casts", "[model][fp8]") {
  GptConfig c = llama_like_config();
  c.recompute_granularity = RecomputeGranularity::kSelective;
  c.recompute_mlp = true;
  GptConfig separate = fp8_config(c, false);
  check_same(train(fp8_config(c, true)), train(separate));
}

TEST_CASE("fp8 norm casts: in a mixture of experts only the input norms cast", "[model][moe][fp8]") {
  // The MoE layer's router and experts read its pre-MLP norm's output; the dense layer's fc1 and
  // both layers' linear_qkv take theirs cast.
  GptConfig moe = llama_like_config();
  moe.moe.num_experts = 4;
  moe.moe.layer_pattern = {false, true};
  moe.moe.topk = 2;
  const GptConfig fused = fp8_config(moe, true);
  CHECK(model_norm_fp8_casts(fused.resolved(), false).input_norm);
  CHECK_FALSE(model_norm_fp8_casts(fused.resolved(), false).pre_mlp_norm);
  check_same(train(fused), train(fp8_config(moe, false)));
}

TEST_CASE("fp8 norm casts: with the GELU in fc2's casts, and bf16 layers beside FP8 ones", "[model][fp8]") {
  // The tanh GELU taken into fc2's casts too; then a first layer outside FP8, whose norms write
  // bf16 as always while the others cast (the outputs stay allocated for it).
  compare(openai_gelu_config());
  GptConfig mixed = fp8_config(openai_gelu_config(), true);
  mixed.fp8->bf16_layers_at_start = 1;
  CHECK_FALSE(model_norm_fp8_casts(mixed.resolved(), false).input_norm);
  GptConfig mixed_separate = mixed;
  mixed_separate.fp8->norm_casts = false;
  check_same(train(mixed), train(mixed_separate));
}

TEST_CASE("fp8 norm casts: which norms cast, and the norm outputs left out of the activations", "[model][fp8]") {
  const GptConfig llama = fp8_config(llama_like_config(), true).resolved();
  CHECK(layer_norm_fp8_casts(llama, false).pre_mlp_norm);
  CHECK_FALSE(layer_norm_fp8_casts(llama, true).pre_mlp_norm);  // an MoE layer's router reads it
  CHECK(layer_norm_fp8_casts(llama, true).input_norm);
  CHECK_FALSE(model_norm_fp8_casts(llama, true).input_norm);  // sequence parallelism
  const auto none = [](GptConfig c) {
    const NormFp8Casts casts = model_norm_fp8_casts(c.resolved(), false);
    return !casts.input_norm && !casts.pre_mlp_norm;
  };
  GptConfig c = llama;
  c.fp8->current_scaling = true;
  CHECK(none(c));
  c = llama;
  c.fp8->wgrad = false;
  CHECK(none(c));
  c = llama;
  c.recompute_granularity = RecomputeGranularity::kFull;
  CHECK(none(c));
  c = llama;
  c.fp8->norm_casts = false;
  CHECK(none(c));
  c = llama;
  c.recompute_granularity = RecomputeGranularity::kSelective;
  c.recompute_layernorm = true;
  CHECK(none(c));
  c.recompute_layernorm = false;
  c.recompute_mlp = true;  // the MLP's forward runs again from the pre-MLP norm's output
  CHECK(model_norm_fp8_casts(c.resolved(), false).input_norm);
  CHECK_FALSE(model_norm_fp8_casts(c.resolved(), false).pre_mlp_norm);
  c = llama;
  c.fp8.reset();
  CHECK(none(c));

  // Neither norm output is allocated, in training and in evaluation; what is counted agrees.
  const auto backend = make_backend("cpu");
  for (const bool training : {true, false}) {
    const ActivationMemory memory(*backend, llama, {}, 8, 2, training);
    CHECK(memory.layer(0).input_norm_output.empty());
    CHECK(memory.layer(0).pre_mlp_norm_output.empty());
    CHECK(memory.allocated().floats == ActivationMemory::elements(llama, 1, 8, 2, training).floats);
    GptConfig separate = llama;
    separate.fp8->norm_casts = false;
    CHECK(ActivationMemory::elements(separate, 1, 8, 2, training).floats -
              ActivationMemory::elements(llama, 1, 8, 2, training).floats ==
          (training ? 2 : 1) * 2 * 16 * 16);
  }
}
