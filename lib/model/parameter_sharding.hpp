// Moving parameter values between the single-rank (TP = 1) layout and the shards of a tensor-
// parallel rank, following each table entry's partition (ParameterEntry::global_index). What a
// test needs to give a TP model the parameters of a single-rank one, and a converter to reshard.
#pragma once
#include <span>
#include <vector>

#include "model/gpt_parameters.hpp"
#include "model/parameter_table.hpp"

namespace mgt {

// Rank tp's shard of one tensor: `entry` is that rank's table entry, `whole` the unsharded
// tensor (entry.global_numel() values, row-major). Replicated tensors come back whole.
std::vector<float> shard_tensor(const ParameterEntry& entry, const TensorParallelRank& tp,
                                std::span<const float> whole);

// The inverse: writes rank tp's shard into its places in the unsharded tensor. The shards of all
// ranks together fill it (a replicated tensor is written whole by each).
void unshard_tensor(const ParameterEntry& entry, const TensorParallelRank& tp,
                    std::span<const float> shard, std::span<float> whole);

// Copies the parameters of `whole`, a single-rank model, into `shard`, a tensor-parallel rank's
// parameters of the same configuration (any rank; also TP = 1, a plain copy).
void shard_parameters(const GptParameters& whole, GptParameters& shard);

}  // namespace mgt
