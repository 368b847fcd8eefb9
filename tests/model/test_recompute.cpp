// Activation recomputation as Megatron-Core offers it: which layers full recomputation
// checkpoints (uniform groups, the first layers of a block), bit-identical losses and gradients
// with and without it (dropout masks repeat), and the activation memory it saves, counted by the
// estimate exactly as allocated.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/backend_factory.hpp"
#include "model/activation_memory.hpp"
#include "model/memory_estimate.hpp"
#include "model/recompute_plan.hpp"
#include "model_testing.hpp"

using namespace mgt;
using namespace mgt::model_testing;

namespace {

GptConfig full(GptConfig c, RecomputeMethod method, int64_t layers) {
  c.recompute_granularity = RecomputeGranularity::kFull;
  c.recompute_method = method;
  c.recompute_num_layers = layers;
  return c;
}

GptConfig selective(GptConfig c, bool core_attention = true) {
  c.recompute_granularity = RecomputeGranularity::kSelective;
  c.recompute_core_attention = core_attention;
  return c;
}

// --recompute-modules: which of core_attn, layernorm and mlp.
GptConfig modules(GptConfig c, bool core_attention, bool layernorm, bool mlp) {
  c = selective(c, core_attention);
  c.recompute_layernorm = layernorm;
  c.recompute_mlp = mlp;
  return c;
}

GptConfig four_layers_with_dropout(GptConfig c) {
  c.num_layers = 4;
  c.hidden_dropout = 0.1;
  c.attention_dropout = 0.2;
  return c;
}

struct Variant {
  std::string name;
  GptConfig config;
};

std::vector<Variant> variants(const GptConfig& c) {
  return {{"full uniform 1", full(c, RecomputeMethod::kUniform, 1)},
          {"full uniform 2", full(c, RecomputeMethod::kUniform, 2)},
          {"full uniform 4", full(c, RecomputeMethod::kUniform, 4)},
          {"full block 1", full(c, RecomputeMethod::kBlock, 1)},
          {"full block 3", full(c, RecomputeMethod::kBlock, 3)},
          {"full block 4", full(c, RecomputeMethod::kBlock, 4)},
          {"selective core_attn", selective(c)},
          {"selective, no module", selective(c, false)},
          {"selective layernorm", modules(c, false, true, false)},
          {"selective mlp", modules(c, false, false, true)},
          {"selective core_attn layernorm mlp", modules(c, true, true, true)}};
}

struct StepResult {
  LossSum loss;
  std::vector<float> grads;
};

// Two micro-batches of one iteration, gradients accumulated.
StepResult train_iteration(const GptConfig& config) {
  const auto backend_owner = make_backend("cpu");
  GptModel model(config, *backend_owner, 7);
  randomize_parameters(model.parameters(), 7);
  StepResult r;
  for (uint32_t mb = 0; mb < 2; ++mb) {
    const LossSum s = model.forward_backward(micro_batch(random_batch(config, 2, 8, 40 + mb)), {5, 9 + mb}, 2);
    r.loss.loss_sum += s.loss_sum;
    r.loss.token_count += s.token_count;
  }
  r.grads = read_all_grads(model.parameters());
  return r;
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// One iteration of `recomputing` gives `plain`'s loss and bit-identical gradients.
void check_same_iteration(const GptConfig& plain, const GptConfig& recomputing) {
  const StepResult want = train_iteration(plain);
  const StepResult got = train_iteration(recomputing);
  CHECK(got.loss.loss_sum == want.loss.loss_sum);
  CHECK(bit_identical(got.grads, want.grads));
}

int64_t training_floats(const GptConfig& c) {
  return ActivationMemory::elements(c, 1, 8, 2, true).floats;
}

// Four layers with dropout, three of them mixtures of 4 experts, top-2.
GptConfig four_layers_three_moe() {
  GptConfig c = four_layers_with_dropout(llama_like_config());
  c.moe.num_experts = 4;
  c.moe.topk = 2;
  c.moe.layer_pattern = {true, false, true, true};
  return c;
}

}  // namespace

TEST_CASE("full recomputation checkpoints Megatron's groups: uniform groups, the first layers of a block",
          "[model][recompute]") {
  const GptConfig c = gpt2_like_config();
  const RecomputePlan uniform(full(c, RecomputeMethod::kUniform, 2), 6, true);
  CHECK(uniform.checkpointed(0));
  CHECK(uniform.group_of(3).first == 2);
  CHECK(uniform.group_of(3).count == 2);
  CHECK(uniform.keeps_input(2));
  CHECK(!uniform.keeps_input(3));
  CHECK(uniform.layers_keeping_input() == 3);
  CHECK(uniform.layers_keeping_activations() == 0);
  CHECK(uniform.scratch_activation_sets() == 2);
  CHECK(uniform.scratch_inputs() == 1);
  CHECK(uniform.activation_lender() == -1);
  CHECK(uniform.describe() == "uniform: 3 groups of 2 layers checkpointed");

  const RecomputePlan block(full(c, RecomputeMethod::kBlock, 2), 6, true);
  CHECK(block.checkpointed(1));
  CHECK(!block.checkpointed(2));
  CHECK(block.group_of(1).first == 1);
  CHECK(block.group_of(1).count == 1);
  CHECK(block.layers_keeping_input() == 6);
  CHECK(block.layers_keeping_activations() == 4);
  // The checkpointed layers' backward comes after the last layer's: they borrow its set.
  CHECK(block.scratch_activation_sets() == 0);
  CHECK(block.activation_lender() == 5);
  CHECK(block.describe() == "block: the first 2 layers of the stage checkpointed one by one, 4 layers keeping "
                            "their activations");
  // More layers than the stage has: all of them, as Megatron's `l < recompute_num_layers`.
  const RecomputePlan whole_block(full(c, RecomputeMethod::kBlock, 8), 3, true);
  CHECK(whole_block.checkpointed(2));
  CHECK(whole_block.scratch_activation_sets() == 1);
  CHECK(whole_block.activation_lender() == -1);

  // Evaluation and the other granularities checkpoint nothing.
  CHECK(!RecomputePlan(full(c, RecomputeMethod::kUniform, 2), 6, false).any_checkpointed());
  CHECK(!RecomputePlan(selective(c), 6, true).any_checkpointed());
  CHECK(RecomputePlan(c, 6, true).layers_keeping_activations() == 6);
}

TEST_CASE("uniform recomputation groups must divide a stage's layers, as Megatron's do", "[model][recompute]") {
  const GptConfig c = full(four_layers_with_dropout(gpt2_like_config()), RecomputeMethod::kUniform, 3);
  CHECK_THROWS_WITH(RecomputePlan(c, 4, true),
                    "--recompute-method uniform: --recompute-num-layers (3) must divide the layers of each pipeline "
                    "stage (4): Megatron checkpoints whole groups of that many layers");
  const auto backend_owner = make_backend("cpu");
  CHECK_THROWS_WITH(GptModel(c, *backend_owner, 1), Catch::Contains("must divide the layers of each pipeline stage"));
}

TEST_CASE("the start-up line says what is recomputed, and that the attention keeps no probabilities",
          "[model][recompute]") {
  const GptConfig c = gpt2_like_config();
  CHECK(describe_recomputation(c, 4).empty());
  CHECK(describe_recomputation(full(c, RecomputeMethod::kUniform, 1), 4) ==
        "full recomputation, uniform: 4 groups of 1 layer checkpointed (only their inputs kept; each group's "
        "forward rerun before its backward)");
  CHECK_THAT(describe_recomputation(selective(c), 4), Catch::Contains("keep no softmax probabilities"));
  CHECK(describe_recomputation(selective(c, false), 4) ==
        "selective recomputation of no module: nothing is recomputed");
  const std::string all = describe_recomputation(modules(c, true, true, true), 4);
  CHECK_THAT(all, Catch::StartsWith("selective recomputation (core_attn: "));
  CHECK_THAT(all, Catch::Contains("; layernorm: the input and pre-MLP norm outputs rebuilt"));
  CHECK_THAT(all, Catch::Contains("; mlp: the dense MLP's fc1 and activation outputs rebuilt"));
}

TEST_CASE("every recomputation gives bit-identical losses and gradients, dropout included", "[model][recompute]") {
  for (const GptConfig& base : {gpt2_like_config(), llama_like_config()}) {
    const GptConfig c = four_layers_with_dropout(base);
    const StepResult plain = train_iteration(c);
    for (const Variant& v : variants(c)) {
      INFO(v.name << (base.normalization == Normalization::kRmsNorm ? ", Llama-like" : ", GPT-2-like"));
      const StepResult got = train_iteration(v.config);
      CHECK(got.loss.loss_sum == plain.loss.loss_sum);
      CHECK(got.loss.token_count == plain.loss.token_count);
      CHECK(bit_identical(got.grads, plain.grads));
    }
  }
}

TEST_CASE("recomputation keeps only what Megatron keeps, and the estimate counts the allocation",
          "[model][recompute]") {
  const auto backend_owner = make_backend("cpu");
  const GptConfig c = four_layers_with_dropout(gpt2_like_config());
  // What one layer's kept input and its activation set take, from the allocations themselves.
  GptConfig three = c;
  three.num_layers = 3;
  const int64_t input = 8 * 2 * c.hidden_size;
  const int64_t set = training_floats(c) - training_floats(three) - input;
  REQUIRE(set > input);
  const int64_t none = training_floats(c);

  // Saved: uniform N keeps L/N group inputs (and N − 1 shared inner ones) and N shared sets;
  // block N frees the first N layers' sets.
  const int64_t L = c.num_layers;
  for (const int64_t n : {1, 2, 4}) {
    INFO("uniform " << n);
    CHECK(none - training_floats(full(c, RecomputeMethod::kUniform, n)) == (L - n) * set + (L - L / n - n + 1) * input);
  }
  for (const int64_t n : {1, 3}) {
    INFO("block " << n);
    CHECK(none - training_floats(full(c, RecomputeMethod::kBlock, n)) == n * set);
  }
  CHECK(none - training_floats(full(c, RecomputeMethod::kBlock, 4)) == (L - 1) * set);
  // layernorm: one pair of [s, b, h] norm outputs for all layers; mlp: one fc1 and one activation
  // output (GELU: both [s, b, ffn]).
  const int64_t tokens = 8 * 2;
  CHECK(none - training_floats(modules(c, false, true, false)) == (L - 1) * 2 * tokens * c.hidden_size);
  CHECK(none - training_floats(modules(c, false, false, true)) == (L - 1) * 2 * tokens * 4 * c.hidden_size);

  for (const Variant& v : variants(c)) {
    INFO(v.name);
    for (const bool training : {true, false}) {
      const ActivationMemory memory(*backend_owner, v.config, {}, 8, 2, training);
      const ActivationElements counted = ActivationMemory::elements(v.config, 1, 8, 2, training);
      CHECK(memory.allocated().floats == counted.floats);
      CHECK(memory.allocated().indices == counted.indices);
    }
  }
  // --qk-layernorm's inputs, statistics and gradients, counted as allocated.
  for (const bool training : {true, false}) {
    const GptConfig q = with_qk_layernorm(c);
    const ActivationMemory memory(*backend_owner, q, {}, 8, 2, training);
    const ActivationElements counted = ActivationMemory::elements(q, 1, 8, 2, training);
    CHECK(memory.allocated().floats == counted.floats);
    CHECK(memory.allocated().fp32_floats == counted.fp32_floats);
    CHECK(counted.floats > ActivationMemory::elements(c, 1, 8, 2, training).floats);
  }

  // The estimate (what --dry-run prints) says what the activations take with and without.
  MemoryEstimateRequest r;
  r.seq_length = 8;
  r.micro_batch_size = 2;
  const MemoryEstimate plain = estimate_memory(c, r);
  CHECK(plain.activation_bytes_without_recomputation == plain.activation_bytes);
  const MemoryEstimate uniform = estimate_memory(full(c, RecomputeMethod::kUniform, 2), r);
  CHECK(uniform.activation_bytes_without_recomputation == plain.activation_bytes);
  CHECK(plain.activation_bytes - uniform.activation_bytes == 4 * ((L - 2) * set + (L - L / 2 - 1) * input));
  const MemoryEstimate sel = estimate_memory(selective(c), r);
  CHECK(sel.activation_bytes < plain.activation_bytes);
  CHECK(sel.activation_bytes_without_recomputation == plain.activation_bytes);
}

TEST_CASE("the micro-batches in flight share full recomputation's scratch, and the estimate counts it once",
          "[model][recompute]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  const GptConfig c = full(four_layers_with_dropout(gpt2_like_config()), RecomputeMethod::kUniform, 2);
  GptConfig three = c;
  three.num_layers = 3;
  three.recompute_granularity = RecomputeGranularity::kNone;
  GptConfig plain = c;
  plain.recompute_granularity = RecomputeGranularity::kNone;
  const int64_t input = 8 * 2 * c.hidden_size;
  const int64_t set = training_floats(plain) - training_floats(three) - input;

  const ActivationElements scratch = ActivationMemory::recompute_scratch_elements(c, 1, 8, 2);
  CHECK(scratch.floats == 2 * set + input);  // one group's two sets and its second layer's input
  const int64_t whole = ActivationMemory::elements(c, 1, 8, 2, true).floats;
  const ActivationMemory first(backend, c, {}, 8, 2, true);
  const ActivationMemory second(backend, c, {}, 8, 2, true, false, false, true, 0, first.recompute_scratch());
  REQUIRE(first.recompute_scratch() != nullptr);
  CHECK(second.recompute_scratch() == first.recompute_scratch());
  CHECK(first.allocated().floats == whole);
  CHECK(second.allocated().floats == whole - scratch.floats);
  // Another shape has its own.
  const ActivationMemory other(backend, c, {}, 4, 2, true, false, false, true, 0, first.recompute_scratch());
  CHECK(other.recompute_scratch() != first.recompute_scratch());
  CHECK(other.allocated().floats == ActivationMemory::elements(c, 1, 4, 2, true).floats);
  // Without checkpointed layers there is none.
  CHECK(ActivationMemory(backend, plain, {}, 8, 2, true).recompute_scratch() == nullptr);
  CHECK(ActivationMemory::recompute_scratch_elements(plain, 1, 8, 2).floats == 0);

  // PP = 2: two stages of two layers, two micro-batches in flight on the first, one scratch.
  MemoryEstimateRequest r;
  r.seq_length = 8;
  r.micro_batch_size = 2;
  r.evaluation_too = false;
  r.layout.pipeline_parallel = 2;
  GptConfig stage = c;
  stage.num_layers = 2;
  const ActivationElements slot = ActivationMemory::elements(stage, 1, 8, 2, true, false, false, false);
  const int64_t stage_scratch = ActivationMemory::recompute_scratch_elements(stage, 1, 8, 2).floats;
  const int64_t last = ActivationMemory::elements(stage, 1, 8, 2, true).bytes();
  CHECK(estimate_memory(c, r).activation_bytes ==
        std::max(4 * (2 * (slot.floats - stage_scratch) + stage_scratch) + 8 * 2 * slot.indices, last));
}

TEST_CASE("moe_act recomputes the experts' activations: bit-identical, one buffer for all MoE layers",
          "[model][recompute][moe]") {
  const GptConfig c = four_layers_three_moe();
  GptConfig act = selective(c, false);
  act.recompute_moe_act = true;
  check_same_iteration(c, act);
  // Three MoE layers, one activation output: two fewer.
  const MoeBufferSizes sizes = moe_buffer_sizes(c.resolved(), 8, 2);
  CHECK(training_floats(c) - training_floats(act) == 2 * sizes.expert_rows * sizes.ffn);
  const auto backend_owner = make_backend("cpu");
  const ActivationMemory memory(*backend_owner, act, {}, 8, 2, true);
  CHECK(memory.allocated().floats == training_floats(act));
  CHECK(memory.allocated().fp32_floats == ActivationMemory::elements(act, 1, 8, 2, true).fp32_floats);
  CHECK_THAT(describe_recomputation(act, 4), Catch::Contains("moe_act: the experts' activation outputs recomputed"));
}

TEST_CASE("moe recomputes whole MoE layers: bit-identical, one set of MoE activations for all MoE layers",
          "[model][recompute][moe]") {
  const GptConfig c = four_layers_three_moe();
  GptConfig moe = selective(c, false);
  moe.recompute_moe = true;
  check_same_iteration(c, moe);
  // Three MoE layers, one set: two fewer, with their fp32 parts and indices.
  const MoeBufferSizes sizes = moe_buffer_sizes(c.resolved(), 8, 2);
  CHECK(training_floats(c) - training_floats(moe) == 2 * sizes.activation_floats());
  const auto backend_owner = make_backend("cpu");
  const ActivationMemory memory(*backend_owner, moe, {}, 8, 2, true);
  const ActivationElements counted = ActivationMemory::elements(moe, 1, 8, 2, true);
  CHECK(memory.allocated().floats == counted.floats);
  CHECK(memory.allocated().fp32_floats == counted.fp32_floats);
  CHECK(memory.allocated().indices == counted.indices);
  CHECK(ActivationMemory::elements(c, 1, 8, 2, true).indices - counted.indices == 2 * sizes.activation_indices());
  CHECK_THAT(describe_recomputation(moe, 4), Catch::Contains("moe: each MoE layer's router, token dispatch and experts"));
  // With moe_act too, the one set is all there is.
  GptConfig both = moe;
  both.recompute_moe_act = true;
  CHECK(training_floats(both) == training_floats(moe));
  CHECK(ActivationMemory(*backend_owner, both, {}, 8, 2, true).allocated().floats == training_floats(both));
}
