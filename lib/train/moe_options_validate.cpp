#include "train/moe_options_validate.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "model/moe_layer_pattern.hpp"
#include "model/moe_upcycling.hpp"

namespace mgt {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

// Megatron's expert linear layers split their features evenly over the expert-tensor-parallel
// ranks (megatron/core/tensor_parallel/layers.py divide: "{} is not divisible by {}").
void check_expert_tensor_split(const TrainOptions& o) {
  const MoeOptions& m = o.moe;
  if (!m.enabled()) return;
  const std::int64_t etp = *m.expert_tensor_parallel_size;
  if (etp > 1 && m.moe_ffn_hidden_size && *m.moe_ffn_hidden_size % etp != 0)
    throw UsageError("--moe-ffn-hidden-size (" + str(*m.moe_ffn_hidden_size) +
                     ") must be divisible by --expert-tensor-parallel-size (" + str(etp) + ")");
}

// Megatron's validate_args for --moe-use-upcycling, and what upcycling_utils.py asserts before
// it converts: a checkpoint to read and a directory to save the result in, a supported
// activation, and a dense MLP that cuts into the experts.
void check_upcycling(TrainOptions& o) {
  MoeOptions& m = o.moe;
  if (!m.moe_use_upcycling) return;
  if (!o.checkpoint.save)
    throw UsageError("--moe-use-upcycling needs --save (Megatron: When using upcycling, the --save option must be "
                     "specified.)");
  if (!o.checkpoint.load) throw UsageError("--moe-use-upcycling needs --load, the dense model's checkpoint");
  if (o.model.openai_gelu)
    throw UsageError("--moe-use-upcycling with --openai-gelu: Megatron's upcycling supports the gelu and silu "
                     "(--swiglu) activations");
  const std::int64_t dense_ffn = *o.model.ffn_hidden_size * m.moe_upcycling_granularity;
  plan_upcycling(dense_ffn, *m.moe_ffn_hidden_size, *m.num_experts, m.moe_router_topk, m.moe_router_pre_softmax,
                 o.model.swiglu);
  CheckpointOptions& c = o.checkpoint;
  if (!c.no_load_optim) {
    c.no_load_optim = true;
    log::warn("--moe-use-upcycling: the dense checkpoint's optimizer state is not loaded (--no-load-optim), as in "
              "Megatron");
  }
  if (!c.no_load_rng) {
    c.no_load_rng = true;
    log::warn("--moe-use-upcycling: the dense checkpoint's random state is not loaded (--no-load-rng), as in Megatron");
  }
}

}  // namespace

void validate_moe_options(TrainOptions& o) {
  MoeOptions& m = o.moe;
  const ModelShapeOptions& model = o.model;
  // megatron/training/arguments.py validate_args.
  if (m.num_experts && *m.num_experts == 0) m.num_experts.reset();
  if (!m.expert_tensor_parallel_size) m.expert_tensor_parallel_size = o.parallel.tensor_model_parallel_size;
  if (*m.expert_tensor_parallel_size < 1)
    throw UsageError("--expert-tensor-parallel-size must be a positive integer, not " +
                     str(*m.expert_tensor_parallel_size));
  if (m.expert_model_parallel_size > 1 && !m.enabled())
    throw UsageError("--expert-model-parallel-size needs --num-experts");
  if (m.enabled() &&
      (m.expert_model_parallel_size > 1 || *m.expert_tensor_parallel_size != o.parallel.tensor_model_parallel_size)) {
    if (*m.num_experts % m.expert_model_parallel_size != 0)
      throw UsageError("--num-experts (" + str(*m.num_experts) + ") must be a multiple of "
                       "--expert-model-parallel-size (" + str(m.expert_model_parallel_size) + ")");
    // parallel_state.initialize_model_parallel: the expert grid (expert-tensor x ep x expert-dp x
    // pp) tiles the world. With the expert-tensor size of the dense layers the expert-parallel
    // ranks are carved from the data-parallel (x context-parallel) ranks of a model replica.
    const std::int64_t tp = o.parallel.tensor_model_parallel_size;
    const std::int64_t etp = *m.expert_tensor_parallel_size;
    const std::int64_t dp_cp = o.parallel.data_parallel_size * o.parallel.context_parallel_size;
    const std::int64_t expert_model = etp * m.expert_model_parallel_size * o.parallel.pipeline_model_parallel_size;
    if (etp == tp && m.expert_model_parallel_size > 1 && dp_cp % m.expert_model_parallel_size != 0)
      throw UsageError("--expert-model-parallel-size (" + str(m.expert_model_parallel_size) +
                       ") must divide the data-parallel size" +
                       (o.parallel.context_parallel_size > 1 ? " x --context-parallel-size (" : " (") + str(dp_cp) +
                       ")");
    if (o.parallel.world_size % expert_model != 0)
      throw UsageError("world size (" + str(o.parallel.world_size) + ") is not divisible by "
                       "--expert-tensor-parallel-size (" + str(etp) + ") x --expert-model-parallel-size (" +
                       str(m.expert_model_parallel_size) + ") x --pipeline-model-parallel-size (" +
                       str(o.parallel.pipeline_model_parallel_size) +
                       "), the expert_tensor_model_pipeline_parallel size (" + str(expert_model) + ")");
    if (o.optim.precision == Precision::Fp16 && m.expert_model_parallel_size > 1)
      throw UsageError("--expert-model-parallel-size with --fp16: Megatron does not support expert parallelism "
                       "with fp16 training");
  }
  // mgt delays only the grouped experts' weight gradients, beside the all-to-all that returns
  // their input gradients; elsewhere the flag would change nothing.
  if (m.delay_wgrad_compute &&
      (!m.enabled() || m.expert_model_parallel_size < 2 || m.moe_token_dispatcher_type != "alltoall" ||
       !m.moe_grouped_gemm || o.fp8.format))
    throw UsageError("--delay-wgrad-compute needs --num-experts with --expert-model-parallel-size > 1, "
                     "--moe-token-dispatcher-type alltoall and --moe-grouped-gemm, without --fp8-format (mgt "
                     "delays the grouped experts' weight gradients beside the all-to-all)");
  if (!m.enabled()) {
    // TransformerConfig: moe_ffn_hidden_size must be None when num_experts is not set.
    if (m.moe_ffn_hidden_size) throw UsageError("--moe-ffn-hidden-size needs --num-experts");
    if (m.moe_use_upcycling)
      throw UsageError("--moe-use-upcycling needs --num-experts (the MoE model to upcycle into)");
    return;
  }
  if (!m.moe_ffn_hidden_size) {
    m.moe_ffn_hidden_size = model.ffn_hidden_size;
    log::info("--moe-ffn-hidden-size is not set: the experts use --ffn-hidden-size (" + str(*model.ffn_hidden_size) +
              "), as Megatron does");
  }
  check_expert_tensor_split(o);
  if (m.moe_grouped_gemm && o.optim.precision != Precision::Bf16)
    throw UsageError("--moe-grouped-gemm needs --bf16 (Megatron: GroupedGEMM for MoE only supports bf16)");

  // megatron/core/transformer/moe/moe_layer.py MoELayer.forward refuses to train so.
  if (o.parallel.tensor_model_parallel_size > 1 && !o.parallel.sequence_parallel)
    throw UsageError("--num-experts with --tensor-model-parallel-size " + str(o.parallel.tensor_model_parallel_size) +
                     " needs --sequence-parallel (Megatron: MoE and tensor parallelism without sequence parallelism "
                     "are refused in training)");

  // megatron/core/transformer/transformer_config.py __post_init__.
  if (m.moe_shared_expert_overlap && m.moe_shared_expert_intermediate_size &&
      m.moe_token_dispatcher_type != "alltoall")
    throw UsageError("--moe-shared-expert-overlap needs --moe-token-dispatcher-type alltoall");
  if (m.moe_shared_expert_gate && m.moe_shared_expert_intermediate_size.value_or(0) <= 0)
    throw UsageError("--moe-shared-expert-gate needs --moe-shared-expert-intermediate-size (the gate scales the "
                     "shared experts' output)");
  if (m.moe_expert_capacity_factor && *m.moe_expert_capacity_factor < 0) m.moe_expert_capacity_factor.reset();
  if (m.moe_router_load_balancing_type == "sinkhorn") {
    if (m.moe_expert_capacity_factor)
      throw UsageError("--moe-expert-capacity-factor with --moe-router-load-balancing-type sinkhorn (Megatron: "
                       "moe_expert_capacity_factor only works with aux_loss, seq_aux_loss or none load balancing)");
    if (m.moe_aux_loss_coeff != 0.0)
      throw UsageError("--moe-router-load-balancing-type sinkhorn needs --moe-aux-loss-coeff 0 (Megatron: Sinkhorn "
                       "routing does not support aux loss.)");
  }
  if (m.moe_pad_expert_input_to_capacity && !m.moe_expert_capacity_factor)
    throw UsageError("--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor");
  if (m.moe_layer_recompute) {
    if (model.recompute_granularity == "full")
      throw UsageError("--moe-layer-recompute and --recompute-granularity full are mutually exclusive (Megatron: "
                       "do not set --moe-layer-recompute with full recompute granularity)");
    log::warn("--moe-layer-recompute is deprecated; use --recompute-granularity selective --recompute-modules moe "
              "(which it turns on, as Megatron does)");
    o.model.recompute_granularity = "selective";
    // TransformerConfig: recompute_modules defaults to ["core_attn"], then "moe" is appended.
    if (!o.model.recompute_modules) o.model.recompute_modules = std::vector<std::string>{"core_attn"};
    if (std::ranges::find(*o.model.recompute_modules, "moe") == o.model.recompute_modules->end())
      o.model.recompute_modules->push_back("moe");
  }
  if (model.add_bias_linear)
    throw UsageError("--num-experts needs --disable-bias-linear (Megatron: bias is not supported for MoE)");
  if (m.moe_input_jitter_eps && !(*m.moe_input_jitter_eps >= 0.0 && *m.moe_input_jitter_eps < 1.0))
    throw UsageError("--moe-input-jitter-eps (" + std::to_string(*m.moe_input_jitter_eps) +
                     ") must be in [0, 1) (the noise's factor 1 - eps must stay positive)");
  if (m.moe_router_enable_expert_bias && m.moe_router_score_function != "sigmoid")
    throw UsageError("--moe-router-enable-expert-bias needs --moe-router-score-function sigmoid");
  if (m.moe_router_topk == 1 && m.moe_router_score_function == "softmax" && !m.moe_router_pre_softmax &&
      m.moe_router_load_balancing_type != "sinkhorn")
    throw UsageError("--moe-router-topk 1 with the softmax score function needs --moe-router-pre-softmax (a "
                     "softmax over one expert has a zero gradient)");
  if (m.moe_apply_probs_on_input && m.moe_router_topk != 1)
    throw UsageError("--moe-apply-probs-on-input needs --moe-router-topk 1 (Megatron's experts: it only works with "
                     "one expert per token)");
  if (m.moe_router_topk > *m.num_experts)
    throw UsageError("--moe-router-topk (" + str(m.moe_router_topk) + ") must not exceed --num-experts (" +
                     str(*m.num_experts) + ")");
  if (m.moe_router_group_topk) {
    if (!m.moe_router_num_groups)
      throw UsageError("--moe-router-group-topk needs --moe-router-num-groups");
    const std::int64_t groups = *m.moe_router_num_groups;
    if (*m.num_experts % groups != 0)
      throw UsageError("--num-experts (" + str(*m.num_experts) + ") must be divisible by --moe-router-num-groups (" +
                       str(groups) + ")");
    if (*m.moe_router_group_topk > groups)
      throw UsageError("--moe-router-group-topk (" + str(*m.moe_router_group_topk) +
                       ") must not exceed --moe-router-num-groups (" + str(groups) + ")");
    // group_limited_topk picks the groups by the sum of each one's top topk / group_topk scores,
    // then topk experts among the chosen groups' experts.
    const std::int64_t per_group = *m.num_experts / groups;
    if (m.moe_router_topk > *m.moe_router_group_topk * per_group)
      throw UsageError("--moe-router-topk (" + str(m.moe_router_topk) + ") must not exceed the experts of "
                       "--moe-router-group-topk groups (" + str(*m.moe_router_group_topk * per_group) + ")");
  }
  // megatron/core/models/gpt/gpt_layer_specs.py: the pattern's length is the number of layers.
  moe_layer_pattern(m.moe_layer_freq, *model.num_layers);
  check_upcycling(o);
}

}  // namespace mgt
