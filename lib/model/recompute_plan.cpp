#include "model/recompute_plan.hpp"

#include "core/error.hpp"

namespace mgt {

bool recomputes_core_attention(const GptConfig& config, bool training) {
  return training && config.recompute_granularity == RecomputeGranularity::kSelective &&
         config.recompute_core_attention;
}

bool recomputes_layernorm(const GptConfig& config, bool training) {
  return training && config.recompute_granularity == RecomputeGranularity::kSelective && config.recompute_layernorm;
}

bool recomputes_mlp(const GptConfig& config, bool training) {
  return training && config.recompute_granularity == RecomputeGranularity::kSelective && config.recompute_mlp;
}

bool recomputes_moe(const GptConfig& config, bool training) {
  return training && config.recompute_granularity == RecomputeGranularity::kSelective && config.recompute_moe &&
         config.moe.enabled();
}

bool recomputes_moe_act(const GptConfig& config, bool training) {
  return training && config.recompute_granularity == RecomputeGranularity::kSelective && config.recompute_moe_act &&
         config.moe.enabled();
}

RecomputePlan::RecomputePlan(const GptConfig& config, int64_t stage_layers, bool training)
    : layers_(stage_layers),
      full_(training && config.recompute_granularity == RecomputeGranularity::kFull),
      method_(config.recompute_method),
      group_size_(config.recompute_num_layers) {
  if (!full_) return;
  if (group_size_ < 1)
    throw UsageError("--recompute-num-layers must be > 0 (got " + std::to_string(group_size_) + ")");
  if (method_ == RecomputeMethod::kUniform && layers_ % group_size_ != 0) {
    // _checkpointed_forward's uniform loop runs custom(l, l + recompute_num_layers), whose last
    // group would index past the stage's layers.
    throw UsageError("--recompute-method uniform: --recompute-num-layers (" + std::to_string(group_size_) +
                     ") must divide the layers of each pipeline stage (" + std::to_string(layers_) +
                     "): Megatron checkpoints whole groups of that many layers");
  }
}

RecomputeGroup RecomputePlan::group_of(int64_t layer) const {
  if (!full_) return {layer, 1, false};
  if (method_ == RecomputeMethod::kUniform) return {layer / group_size_ * group_size_, group_size_, true};
  return {layer, 1, layer < group_size_};  // block: the stage's first layers, one by one
}

bool RecomputePlan::keeps_input(int64_t layer) const {
  const RecomputeGroup g = group_of(layer);
  return !g.checkpointed || layer == g.first;
}

int64_t RecomputePlan::layers_keeping_input() const {
  return full_ && method_ == RecomputeMethod::kUniform ? layers_ / group_size_ : layers_;
}

int64_t RecomputePlan::layers_keeping_activations() const {
  if (!full_) return layers_;
  return method_ == RecomputeMethod::kUniform ? 0 : layers_ - block_layers();
}

bool RecomputePlan::any_checkpointed() const { return full_ && layers_ > 0; }

int64_t RecomputePlan::scratch_activation_sets() const {
  if (!any_checkpointed()) return 0;
  if (method_ == RecomputeMethod::kUniform) return group_size_;
  return activation_lender() >= 0 ? 0 : 1;
}

int64_t RecomputePlan::activation_lender() const {
  const bool lends = any_checkpointed() && method_ == RecomputeMethod::kBlock && block_layers() < layers_;
  return lends ? layers_ - 1 : -1;
}

int64_t RecomputePlan::scratch_inputs() const {
  // Block groups hold one layer: no inner inputs.
  return any_checkpointed() && method_ == RecomputeMethod::kUniform ? group_size_ - 1 : 0;
}

std::string RecomputePlan::describe() const {
  if (!any_checkpointed()) return "no layer recomputed";
  const auto layers = [](int64_t n) { return std::to_string(n) + (n == 1 ? " layer" : " layers"); };
  if (method_ == RecomputeMethod::kBlock) {
    return "block: the first " + layers(block_layers()) + " of the stage checkpointed one by one, " +
           layers(layers_ - block_layers()) + " keeping their activations";
  }
  const int64_t groups = layers_ / group_size_;
  return "uniform: " + std::to_string(groups) + (groups == 1 ? " group" : " groups") + " of " +
         layers(group_size_) + " checkpointed";
}

std::string describe_recomputation(const GptConfig& config, int64_t stage_layers) {
  switch (config.recompute_granularity) {
    case RecomputeGranularity::kNone:
      return "";
    case RecomputeGranularity::kFull:
      return "full recomputation, " + RecomputePlan(config, stage_layers, true).describe() +
             " (only their inputs kept; each group's forward rerun before its backward)";
    case RecomputeGranularity::kSelective: {
      const bool moe_act = recomputes_moe_act(config, true);
      const bool moe = recomputes_moe(config, true);
      if (!config.recompute_core_attention && !config.recompute_layernorm && !config.recompute_mlp && !moe_act && !moe)
        return "selective recomputation of no module: nothing is recomputed";
      std::string out;
      const auto add = [&](const std::string& part) { out += (out.empty() ? "" : "; ") + part; };
      // Megatron's core_attn recomputation drops the [b, heads, s, s] softmax probabilities of its
      // unfused attention (megatron/core/transformer/dot_product_attention.py); TransformerConfig
      // warns that fused attention has no need of it.
      if (config.recompute_core_attention)
        add("core_attn: mgt's attention kernels keep no softmax probabilities (only their log-sum-exp "
            "statistics), so there is no [s, s] tensor to recompute; what is rebuilt before each layer's attention "
            "backward is the attention output and its statistics, shared by all layers");
      if (config.recompute_layernorm)
        add("layernorm: the input and pre-MLP norm outputs rebuilt from the kept layer input and residual before "
            "each layer's backward, one pair shared by all layers");
      if (config.recompute_mlp)
        add("mlp: the dense MLP's fc1 and activation outputs rebuilt by rerunning its forward before its "
            "backward, one pair shared by all layers");
      if (moe_act)
        add("moe_act: the experts' activation outputs recomputed from their fc1 outputs before the experts' "
            "backward, one buffer shared by all MoE layers");
      if (moe)
        add("moe: each MoE layer's router, token dispatch and experts rerun from its kept input before its "
            "backward, one set of MoE activations shared by all MoE layers");
      return "selective recomputation (" + out + ")";
    }
  }
  return "";
}

}  // namespace mgt
