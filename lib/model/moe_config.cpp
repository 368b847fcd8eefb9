#include "model/moe_config.hpp"

#include <algorithm>
#include <cmath>

#include "model/moe_layer_pattern.hpp"

namespace mgt {

std::int64_t MoeConfig::num_moe_layers() const {
  return enabled() ? static_cast<std::int64_t>(std::count(layer_pattern.begin(), layer_pattern.end(), true)) : 0;
}

std::string_view to_string(MoeLoadBalancing type) {
  switch (type) {
    case MoeLoadBalancing::kAuxLoss:
      return "aux_loss";
    case MoeLoadBalancing::kSeqAuxLoss:
      return "seq_aux_loss";
    case MoeLoadBalancing::kSinkhorn:
      return "sinkhorn";
    case MoeLoadBalancing::kNone:
      return "none";
  }
  return "?";
}

std::string_view to_string(MoeScoreFunction type) {
  return type == MoeScoreFunction::kSoftmax ? "softmax" : "sigmoid";
}
std::string_view to_string(MoeDropPolicy policy) { return policy == MoeDropPolicy::kProbs ? "probs" : "position"; }
std::string_view to_string(MoeDispatcher type) { return type == MoeDispatcher::kAllgather ? "allgather" : "alltoall"; }

MoeConfig moe_config_from_options(const MoeOptions& o, std::int64_t num_layers) {
  MoeConfig c;
  if (!o.enabled()) return c;
  c.num_experts = *o.num_experts;
  c.layer_pattern = moe_layer_pattern(o.moe_layer_freq, num_layers);
  c.ffn_hidden_size = o.moe_ffn_hidden_size.value_or(0);
  c.shared_expert_intermediate_size = o.moe_shared_expert_intermediate_size.value_or(0);
  c.shared_expert_gate = o.moe_shared_expert_gate;
  c.shared_expert_overlap = o.moe_shared_expert_overlap;
  c.delay_wgrad_compute = o.delay_wgrad_compute;
  c.topk = o.moe_router_topk;
  c.score_function = o.moe_router_score_function == "sigmoid" ? MoeScoreFunction::kSigmoid : MoeScoreFunction::kSoftmax;
  c.pre_softmax = o.moe_router_pre_softmax;
  c.router_fp64 = o.moe_router_dtype == "fp64";
  c.num_groups = o.moe_router_num_groups.value_or(0);
  c.group_topk = o.moe_router_group_topk.value_or(0);
  c.topk_scaling_factor = o.moe_router_topk_scaling_factor.value_or(0.0);
  c.enable_expert_bias = o.moe_router_enable_expert_bias;
  c.bias_update_rate = o.moe_router_bias_update_rate;
  c.load_balancing = o.moe_router_load_balancing_type == "seq_aux_loss" ? MoeLoadBalancing::kSeqAuxLoss
                     : o.moe_router_load_balancing_type == "sinkhorn"   ? MoeLoadBalancing::kSinkhorn
                     : o.moe_router_load_balancing_type == "none"       ? MoeLoadBalancing::kNone
                                                                        : MoeLoadBalancing::kAuxLoss;
  c.aux_loss_coeff = o.moe_aux_loss_coeff;
  c.z_loss = o.moe_z_loss_coeff.has_value();
  c.z_loss_coeff = o.moe_z_loss_coeff.value_or(0.0);
  c.input_jitter_eps = o.moe_input_jitter_eps.value_or(0.0);
  c.force_load_balancing = o.moe_router_force_load_balancing;
  c.apply_probs_on_input = o.moe_apply_probs_on_input;
  // Megatron: a negative factor means None.
  c.capacity_factor = std::max(-1.0, o.moe_expert_capacity_factor.value_or(-1.0));
  if (c.capacity_factor < 0.0) c.capacity_factor = -1.0;
  c.pad_to_capacity = o.moe_pad_expert_input_to_capacity;
  c.grouped_gemm = o.moe_grouped_gemm;
  c.drop_policy = o.moe_token_drop_policy == "position" ? MoeDropPolicy::kPosition : MoeDropPolicy::kProbs;
  c.dispatcher = o.moe_token_dispatcher_type == "alltoall" ? MoeDispatcher::kAlltoall : MoeDispatcher::kAllgather;
  c.expert_model_parallel_size = o.expert_model_parallel_size;
  c.expert_tensor_parallel_size = o.expert_tensor_parallel_size.value_or(0);
  c.per_layer_logging = o.moe_per_layer_logging;
  return c;
}

std::int64_t expert_capacity(std::int64_t num_routed, std::int64_t num_experts, double capacity_factor,
                             std::int64_t num_tokens) {
  const double capacity =
      std::ceil(static_cast<double>(num_routed) / static_cast<double>(num_experts) * capacity_factor);
  return std::min<std::int64_t>(static_cast<std::int64_t>(capacity), num_tokens);
}

}  // namespace mgt
