// Megatron-Core's aux-loss-free load balancing (--moe-router-enable-expert-bias, DeepSeek-V3):
// each MoE layer's router keeps a per-expert bias, a buffer that is not trained, added to the
// sigmoid scores for the top-k choice only (moe_routing_math.hpp choice_score), and counts the
// tokens it routes to each expert in training (TopKRouter._apply_expert_bias in
// megatron/core/transformer/moe/router.py: the routing map after the capacity, summed over the
// micro-batches of the step). After the step's backward the counts are summed over the ranks
// that routed other tokens and every bias moves by rate · sign(mean − count)
// (megatron/core/distributed/finalize_model_grads.py _update_router_expert_bias,
// megatron/core/transformer/moe/moe_utils.py get_updated_expert_bias); the counts start again
// from zero. The biases are saved in checkpoints under Megatron's name
// decoder.layers.{i}.mlp.router.expert_bias; the counts (Megatron's local_tokens_per_expert, not
// persistent there) are zero between steps and are not.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dist/communicator.hpp"
#include "kernels/backend.hpp"
#include "model/moe_config.hpp"
#include "model/pipeline_stage.hpp"

namespace mgt {

// get_updated_expert_bias for one layer, in fp32 as Megatron computes it: bias[e] +=
// rate · sign(Σ counts / experts − counts[e]); an expert at the mean keeps its bias.
void update_expert_bias(std::span<float> bias, std::span<const float> tokens_per_expert, double rate);

class MoeExpertBias {
public:
  MoeExpertBias() = default;
  // Zero biases and counts for the MoE layers that `stage` holds when the configuration enables
  // the expert bias; nothing otherwise.
  MoeExpertBias(const MoeConfig& moe, std::int64_t num_layers, const PipelineStage& stage, Backend& backend);

  bool enabled() const { return !layers_.empty(); }
  // This rank's MoE layers (global numbers), in order.
  const std::vector<std::int64_t>& layers() const { return layers_; }
  // Layer `layer`'s bias in the backend's memory ([experts] fp32), null when the layer has none.
  const float* bias(std::int64_t layer) const;
  // Where layer `layer`'s router adds its counts ([experts] fp32); empty when it has no bias.
  FloatView tokens_per_expert(std::int64_t layer);

  // The checkpoint name of layer `layer`'s bias.
  static std::string name(std::int64_t layer);
  std::vector<float> read(std::int64_t layer) const;
  void write(std::int64_t layer, std::span<const float> values);

  // _update_router_expert_bias: the counts summed over `group` (null or one rank: this rank's
  // alone), every bias updated, the counts zeroed.
  void update(dist::Communicator* group);

private:
  std::int64_t slot(std::int64_t layer) const;  // −1 when the layer has no bias here

  Backend* backend_ = nullptr;
  std::int64_t experts_ = 0;
  double rate_ = 0.0;
  std::vector<std::int64_t> layers_;
  std::vector<float> host_bias_;  // [layers_, experts]: the biases' master copy
  DeviceArray<float> bias_;       // its copy in the backend's memory, read by the routing
  DeviceArray<float> tokens_;     // [layers_, experts]
};

}  // namespace mgt
