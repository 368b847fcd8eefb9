// The MoE routers' expert biases (model/moe_expert_bias.hpp) in a checkpoint: one whole fp32
// tensor [experts] per MoE layer, "buffers/decoder.layers.{i}.mlp.router.expert_bias" (Megatron's
// persistent buffer expert_bias beside the model's parameters), the same in every model shard that
// holds the layer, so that resharding copies it as it is.
#pragma once
#include <cstdint>
#include <string>

#include "ckpt/shard_file_snapshot.hpp"
#include "ckpt/sharded_checkpoint.hpp"
#include "model/moe_expert_bias.hpp"

namespace mgt::ckpt {

std::string expert_bias_path(std::int64_t layer);

// This rank's layers' biases into the sink's current file.
void emit_expert_bias(ShardFileSink& out, const MoeExpertBias& bias);

// Each of this rank's layers' stored bias; a layer without one (a checkpoint of a run without
// --moe-router-enable-expert-bias) starts from zero, with a note. `where` names the checkpoint in
// messages.
void load_expert_bias(const ShardedCheckpoint& reader, MoeExpertBias& bias, const std::string& where);

}  // namespace mgt::ckpt
