// What the model makes of the Mixture-of-Experts flags (model/moe_options.hpp): Megatron-Core's
// TransformerConfig moe_* fields (megatron/core/transformer/transformer_config.py), resolved.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "model/moe_options.hpp"

namespace mgt {

// --moe-router-load-balancing-type
enum class MoeLoadBalancing { kAuxLoss, kSeqAuxLoss, kSinkhorn, kNone };
// --moe-router-score-function
enum class MoeScoreFunction { kSoftmax, kSigmoid };
// --moe-token-drop-policy
enum class MoeDropPolicy { kProbs, kPosition };
// --moe-token-dispatcher-type
enum class MoeDispatcher { kAllgather, kAlltoall };

struct MoeConfig {
  std::int64_t num_experts = 0;  // 0: a dense model
  // One entry per layer of the whole model, true for an MoE layer (--moe-layer-freq).
  std::vector<bool> layer_pattern;
  std::int64_t ffn_hidden_size = 0;                  // each expert's (--moe-ffn-hidden-size)
  std::int64_t shared_expert_intermediate_size = 0;  // 0: no shared expert
  // --moe-shared-expert-gate: the shared experts' output scaled per token by sigmoid(x·w_gate)
  // (megatron/core/transformer/moe/shared_experts.py, SharedExpertMLP with gate=True).
  bool shared_expert_gate = false;
  // --moe-shared-expert-overlap: the shared experts computed while the tokens travel to the
  // experts' ranks (model/moe_layer.hpp); a schedule, the results are the same.
  bool shared_expert_overlap = false;
  // --delay-wgrad-compute: the grouped experts' weight gradients computed while their input
  // gradients travel back (model/moe_layer.hpp); a schedule, the results are the same.
  bool delay_wgrad_compute = false;
  std::int64_t topk = 2;
  MoeScoreFunction score_function = MoeScoreFunction::kSoftmax;
  bool pre_softmax = false;
  // --moe-router-dtype fp64: the gate's GEMMs (logits, and their weight and input gradients) in
  // fp64, the logits then rounded to fp32 (model/moe_router.hpp); the routing itself stays fp32.
  bool router_fp64 = false;
  std::int64_t num_groups = 0;  // group-limited routing when group_topk > 0
  std::int64_t group_topk = 0;
  double topk_scaling_factor = 0.0;  // 0: none (Megatron's `if scaling_factor:`)
  bool enable_expert_bias = false;
  double bias_update_rate = 1e-3;
  MoeLoadBalancing load_balancing = MoeLoadBalancing::kAuxLoss;
  double aux_loss_coeff = 0.0;
  double z_loss_coeff = 0.0;
  bool z_loss = false;  // --moe-z-loss-coeff given (Megatron computes it whenever it is not None)
  double input_jitter_eps = 0.0;  // 0: no jitter
  // --moe-router-force-load-balancing: the router's logits replaced by standard normal draws
  // (model/moe_router.hpp), their gradient passed straight to the gate.
  bool force_load_balancing = false;
  // --moe-apply-probs-on-input (top-1 only): each token's input to its expert times the routing
  // probability, the expert's output added as it is (model/moe_token_dispatcher.hpp).
  bool apply_probs_on_input = false;
  double capacity_factor = -1.0;  // < 0: dropless (Megatron's None)
  bool pad_to_capacity = false;
  // --moe-grouped-gemm: the local experts' GEMMs as one grouped operation per projection
  // (model/moe_experts.hpp).
  bool grouped_gemm = false;
  MoeDropPolicy drop_policy = MoeDropPolicy::kProbs;
  MoeDispatcher dispatcher = MoeDispatcher::kAllgather;
  std::int64_t expert_model_parallel_size = 1;
  // --expert-tensor-parallel-size: 1 keeps each expert's weights whole on every tensor-parallel
  // rank; 0 (Megatron's default) or the tensor-parallel size splits them over the tensor-parallel
  // ranks; any other size over the expert-tensor-parallel ranks of Megatron's expert grid
  // (dist/parallel_layout.hpp).
  std::int64_t expert_tensor_parallel_size = 0;
  // Whether each expert's weights are whole on every rank of `tp` tensor-parallel ranks.
  bool experts_whole(std::int64_t tp) const { return tp > 1 && expert_tensor_parallel_size == 1; }
  // Whether the experts are split over expert-tensor-parallel ranks of their own: a size other
  // than 1 and the tensor-parallel size `tp`.
  bool experts_on_own_tensor_grid(std::int64_t tp) const {
    return expert_tensor_parallel_size > 1 && expert_tensor_parallel_size != tp;
  }
  // Under experts_on_own_tensor_grid, each row the experts take travels to this many ranks, the
  // expert-tensor-parallel ranks of its expert's rank (the size; 1 otherwise). Set by the model
  // from its parameters' ExpertParallelRank; sizes the exchange buffers (model/moe_buffers.hpp).
  std::int64_t expert_row_replicas = 1;
  // The ranks over which sequence parallelism splits the tokens around the MoE layers (1: none),
  // which then gather the whole sequence's tokens and keep two more [tokens, h] buffers, and
  // route each rank's part by itself (model/moe_layer.hpp).
  std::int64_t sequence_parallel_size = 1;
  bool per_layer_logging = false;

  bool enabled() const { return num_experts > 0; }
  bool is_moe_layer(std::int64_t layer) const {
    return enabled() && layer >= 0 && layer < static_cast<std::int64_t>(layer_pattern.size()) &&
           layer_pattern[static_cast<std::size_t>(layer)];
  }
  std::int64_t num_moe_layers() const;
  bool drops_tokens() const { return capacity_factor >= 0.0; }
};

std::string_view to_string(MoeLoadBalancing type);   // "aux_loss" | "seq_aux_loss" | "none"
std::string_view to_string(MoeScoreFunction type);   // "softmax" | "sigmoid"
std::string_view to_string(MoeDropPolicy policy);    // "probs" | "position"
std::string_view to_string(MoeDispatcher type);      // "allgather" | "alltoall"

// The configuration of validated flags (train/moe_options_validate.hpp) for a model of
// `num_layers` layers. Dense (num_experts 0) when --num-experts is unset or 0.
MoeConfig moe_config_from_options(const MoeOptions& options, std::int64_t num_layers);

// Megatron's get_capacity (megatron/core/transformer/moe/moe_utils.py):
// ceil(num_tokens / num_experts · capacity_factor), here at most num_tokens (Megatron's top-k over
// the tokens would fail beyond that; no token is dropped there).
std::int64_t expert_capacity(std::int64_t num_routed, std::int64_t num_experts, double capacity_factor,
                             std::int64_t num_tokens);

}  // namespace mgt
