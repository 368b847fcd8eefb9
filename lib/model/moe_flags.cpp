#include "model/moe_flags.hpp"

#include <algorithm>
#include <cstdint>

namespace mgt {

namespace {

ArgValue moe_layer_freq_value(const std::string& text) {
  const bool integer = !text.empty() && text.size() < 19 &&
                       std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  return integer ? ArgValue(static_cast<std::int64_t>(std::stoll(text))) : ArgValue(text);
}

}  // namespace

// Megatron's names and defaults (megatron/training/arguments.py _add_moe_args, core_v0.13.0).
// Ranges: core/flag_ranges.cpp; checks between flags: train/moe_options_validate.cpp.
// clang-format off
std::vector<FlagDefinition> moe_flags(MoeOptions& m) {
  return {
    store("num-experts", "N", m.num_experts, "Experts in each MoE layer (unset or 0: a dense model)"),
    store("expert-model-parallel-size", "N", m.expert_model_parallel_size, "Expert-parallel ranks, each holding num-experts / N experts, laid out as Megatron's expert grid (expert-tensor x N x expert-data x pipeline ranks); the tokens reach them by all-to-all (--moe-token-dispatcher-type alltoall) or all-gather and reduce-scatter (allgather)"),
    store("expert-tensor-parallel-size", "N", m.expert_tensor_parallel_size, "Tensor-parallel ranks of each expert's weights, laid out in Megatron's expert grid (expert-tensor x expert-model x expert-data x pipeline ranks): the tensor-parallel size splits them as the dense MLPs; 1 keeps each expert whole (with --expert-model-parallel-size the expert-parallel groups then span the tensor-parallel ranks); any other size that tiles the world splits them over expert-tensor-parallel groups of their own, each rank sending its tokens to every slice of their experts").default_text("--tensor-model-parallel-size"),
    // Megatron's moe_freq_type keeps an integer as an int and a list expression as its list.
    custom_flag("moe-layer-freq", FlagArity::One, "F", "One MoE layer every F layers (an integer), or the layers' pattern as a list expression of 1 (MoE) and 0 (dense), e.g. \"([0]+[1]*3)*2\"",
                [&m](const std::vector<std::string>& values) { m.moe_layer_freq = values.at(0); },
                [&m] { return moe_layer_freq_value(m.moe_layer_freq); }),
    store("moe-ffn-hidden-size", "N", m.moe_ffn_hidden_size, "Hidden size of each expert's MLP").default_text("--ffn-hidden-size"),
    store("moe-shared-expert-intermediate-size", "N", m.moe_shared_expert_intermediate_size, "Hidden size of the shared experts' MLP (their number x each one's size); unset: no shared expert"),
    // Megatron-Core v0.13's SharedExpertMLP takes a `gate` (shared_experts.py) that its layer specs
    // leave off; Qwen2-MoE's shared expert has it. Later Megatron versions name the flag so.
    store_true("moe-shared-expert-gate", m.moe_shared_expert_gate, "Scale the shared experts' output per token by sigmoid(x . w), w a [1, hidden] weight (Megatron-Core's SharedExpertMLP gate, Qwen2-MoE's shared_expert_gate)"),
    store_true("moe-shared-expert-overlap", m.moe_shared_expert_overlap, "With the alltoall dispatcher and expert parallelism: run the shared experts while the tokens travel to the experts' ranks (their backward too, without --moe-shared-expert-gate); the results are the same"),
    store_true("moe-grouped-gemm", m.moe_grouped_gemm, "Run each projection of the local experts as one grouped operation; results agree up to rounding"),
    store_true("delay-wgrad-compute", m.delay_wgrad_compute, "With expert parallelism, the alltoall dispatcher and --moe-grouped-gemm (not FP8): compute the experts' weight gradients while their input gradients travel back to the tokens' ranks; the results are the same"),
    store_true("moe-layer-recompute", m.moe_layer_recompute, "Deprecated: recompute the MoE layers in the backward"),
    store("moe-router-load-balancing-type", "TYPE", m.moe_router_load_balancing_type, "aux_loss (GShard's and Switch Transformer's, over the micro-batch), seq_aux_loss (per sequence, DeepSeek-V2's), sinkhorn (BASE layers': in training each token's experts are chosen by the Sinkhorn balancing of the logits over the micro-batch, weighted by the sigmoid for top-1 or the softmax over all experts; no auxiliary loss) or none")
        .choices({"aux_loss", "seq_aux_loss", "sinkhorn", "none"}),
    store("moe-router-dtype", "TYPE", m.moe_router_dtype, "Type of the router's computation: fp32, or fp64 (the gating GEMMs in fp64, the logits then rounded to fp32 as Megatron's softmax reads them; the routing in fp32). Without the flag Megatron routes in the activations' type (bf16 under --bf16), mgt in fp32").choices({"fp32", "fp64"})
        .default_text("fp32"),
    store("moe-router-score-function", "F", m.moe_router_score_function, "Score function of the router: softmax or sigmoid").choices({"softmax", "sigmoid"}),
    store("moe-router-topk", "K", m.moe_router_topk, "Experts each token is routed to"),
    store_true("moe-router-pre-softmax", m.moe_router_pre_softmax, "Softmax over all experts before the top-k choice, instead of over the k chosen after it"),
    store("moe-router-num-groups", "N", m.moe_router_num_groups, "Groups of experts for group-limited routing"),
    store("moe-router-group-topk", "N", m.moe_router_group_topk, "Groups chosen per token in group-limited routing"),
    store("moe-router-topk-scaling-factor", "F", m.moe_router_topk_scaling_factor, "Factor on the chosen experts' probabilities"),
    store_true("moe-router-enable-expert-bias", m.moe_router_enable_expert_bias, "Auxiliary-loss-free balancing: a per-expert bias added to the scores for the choice only, updated each iteration from the tokens each expert received"),
    store("moe-router-bias-update-rate", "F", m.moe_router_bias_update_rate, "Step of the expert-bias update: each bias moves by it towards the mean count after every iteration"),
    store("moe-aux-loss-coeff", "F", m.moe_aux_loss_coeff, "Coefficient of the auxiliary load-balancing loss"),
    store("moe-z-loss-coeff", "F", m.moe_z_loss_coeff, "Coefficient of the router's z-loss; unset: none"),
    store("moe-input-jitter-eps", "F", m.moe_input_jitter_eps, "Multiply the router's input by uniform noise in [1 - eps, 1 + eps] in training"),
    store_true("moe-router-force-load-balancing", m.moe_router_force_load_balancing, "A benchmarking aid: route by standard normal random logits instead of the router's (even loads on average); the router's weight still gets their gradient, passed straight through as Megatron's RandomSTE passes it. mgt-eval and mgt-generate route by the router"),
    store_true("moe-apply-probs-on-input", m.moe_apply_probs_on_input, "With --moe-router-topk 1: multiply each token's input to its expert by the routing probability, instead of the expert's output (Llama 4's experts)"),
    store_true("moe-per-layer-logging", m.moe_per_layer_logging, "Log the auxiliary and z losses of each layer too"),
    store("moe-token-dispatcher-type", "TYPE", m.moe_token_dispatcher_type, "allgather or alltoall").choices({"allgather", "alltoall"})
        .refused_because("flex", "Megatron's flex dispatcher runs DeepEP's kernels, which are not implemented; alltoall moves the same tokens"),
    store_true("moe-permute-fusion", m.moe_permute_fusion, "Fused token permutation; results are the same"),
    store("moe-expert-capacity-factor", "F", m.moe_expert_capacity_factor, "Each expert's capacity as a multiple of its even share of the tokens; tokens beyond it are dropped. Unset or negative: no dropping"),
    store_true("moe-pad-expert-input-to-capacity", m.moe_pad_expert_input_to_capacity, "Pad each expert's input to its capacity (with --moe-expert-capacity-factor)"),
    store_true("moe-router-padding-for-fp8", m.moe_router_padding_for_fp8, "Pad each expert's tokens to a multiple of 16 for the FP8 GEMMs (needs --fp8-format; alltoall dispatcher). mgt pads them under FP8 with or without it, with zero rows, as Megatron's experts do without it: outputs and gradients are unchanged"),
    store("moe-token-drop-policy", "P", m.moe_token_drop_policy, "Which tokens beyond capacity are dropped: probs (the lowest probabilities) or position (the last)").choices({"probs", "position"}),
    store_true("moe-use-upcycling", m.moe_use_upcycling, "Start from the checkpoint of a dense model in --load: each MoE layer's experts are cut from that layer's MLP as Megatron's upcycling does (the router and shared experts freshly initialised), the result is saved to --save as iteration 1, and training starts at iteration 0 with a fresh optimizer. Only for the run that converts; later runs resume from --save without it"),
    store("moe-upcycling-granularity", "G", m.moe_upcycling_granularity, "With --moe-use-upcycling: the dense MLP's hidden units are G times --ffn-hidden-size, and each expert takes one of its G slices (1: every expert a whole copy)"),
  };
}
// clang-format on

const std::map<std::string, std::string>& refused_moe_flags() {
  static const std::map<std::string, std::string> flags = {
      {"--moe-enable-deepep", "DeepEP's dispatch kernels are not implemented; --moe-token-dispatcher-type alltoall "
                              "moves the same tokens"},
      {"--moe-deepep-num-sms", "DeepEP's dispatch kernels are not implemented; --moe-token-dispatcher-type "
                               "alltoall moves the same tokens"},
  };
  return flags;
}

}  // namespace mgt
