// The Mixture-of-Experts flags of Megatron's pretraining parser (megatron/training/arguments.py
// _add_moe_args, core_v0.13.0) as mgt-train reads them. Their definitions are in
// model/moe_flags.cpp; the checks between them (Megatron's validate_args and TransformerConfig
// __post_init__) in train/moe_options_validate.cpp; what the model makes of them in
// model/moe_config.hpp.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace mgt {

struct MoeOptions {
  std::int64_t expert_model_parallel_size = 1;                  // --expert-model-parallel-size
  std::optional<std::int64_t> expert_tensor_parallel_size;      // --expert-tensor-parallel-size: TP
  std::optional<std::int64_t> num_experts;                      // --num-experts (0 or unset: dense)
  std::string moe_layer_freq = "1";                             // --moe-layer-freq: N or a list expression
  std::optional<std::int64_t> moe_ffn_hidden_size;              // --moe-ffn-hidden-size: --ffn-hidden-size
  std::optional<std::int64_t> moe_shared_expert_intermediate_size;
  bool moe_shared_expert_overlap = false;
  bool moe_shared_expert_gate = false;  // mgt's --moe-shared-expert-gate (not in Megatron v0.13's parser)
  bool moe_grouped_gemm = false;
  bool delay_wgrad_compute = false;  // --delay-wgrad-compute
  bool moe_layer_recompute = false;
  std::string moe_router_load_balancing_type = "aux_loss";      // aux_loss | seq_aux_loss | none
  std::optional<std::string> moe_router_dtype;                  // fp32
  std::string moe_router_score_function = "softmax";            // softmax | sigmoid
  std::int64_t moe_router_topk = 2;
  bool moe_router_pre_softmax = false;
  std::optional<std::int64_t> moe_router_num_groups;
  std::optional<std::int64_t> moe_router_group_topk;
  std::optional<double> moe_router_topk_scaling_factor;
  bool moe_router_enable_expert_bias = false;
  double moe_router_bias_update_rate = 1e-3;
  double moe_aux_loss_coeff = 0.0;
  std::optional<double> moe_z_loss_coeff;
  std::optional<double> moe_input_jitter_eps;
  bool moe_router_force_load_balancing = false;
  bool moe_apply_probs_on_input = false;
  bool moe_per_layer_logging = false;
  std::string moe_token_dispatcher_type = "allgather";          // allgather | alltoall
  bool moe_permute_fusion = false;
  std::optional<double> moe_expert_capacity_factor;             // unset (or negative): no dropping
  bool moe_pad_expert_input_to_capacity = false;
  // Accepted under FP8: mgt pads every expert's rows to a multiple of 16 with zero rows anyway
  // (moe_expert_row_multiple).
  bool moe_router_padding_for_fp8 = false;
  std::string moe_token_drop_policy = "probs";                  // probs | position
  // --moe-use-upcycling: the run starts from a dense model's checkpoint (--load), each MoE
  // layer's experts cut from its dense MLP (model/moe_upcycling.hpp).
  bool moe_use_upcycling = false;
  std::int64_t moe_upcycling_granularity = 1;  // --moe-upcycling-granularity: dense ffn / --ffn-hidden-size

  // Whether the model has experts: Megatron's num_experts after validate_args turned 0 into None.
  bool enabled() const { return num_experts.value_or(0) > 0; }
};

}  // namespace mgt
