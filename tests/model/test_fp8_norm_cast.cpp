// The norms that write their output in FP8 for linear_qkv and linear_fc1 (model/norm_fp8_cast.hpp)
// against the same model with the norm writing bf16 and the linear layer casting it
// (Fp8Recipe::norm_casts off): a few training steps of bf16-storage FP8 models on the CPU give the
// same losses, gradients, parameters and FP8 state to the bit, and so does an evaluation pass.
#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>

#include "kernels/backend_factory.hpp"
#include "model/activation_memory.hpp"
#include "model/gpt_model.hpp"
#include "model/norm_fp8_cast.hpp"
#include "fp8_norm_cast_testing.hpp"
#include "model_testing.hpp"

using namespace mgt;
using namespace mgt::model_testing;
using namespace mgt::fp8_norm_cast_testing;

namespace {

// bf16 activations on the CPU, two sequences a micro-batch.
Run train(const GptConfig& config) {
  const std::unique_ptr<Backend> backend = make_backend("cpu");
  backend->set_activation_type(FloatType::kBf16);
  return fp8_norm_cast_testing::train(*backend, config, 2);
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
