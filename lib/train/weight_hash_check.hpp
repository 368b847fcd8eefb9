// --check-weight-hash-across-dp-replicas-interval: Megatron's check_param_hashes_across_dp_replicas
// (megatron/core/utils.py, cross_check=True): every data-parallel replica must hold the same
// weights, bit for bit. A replica whose weights drifted (a faulty GPU or link, a missed update)
// would otherwise train on silently. Each rank hashes its tensors as the layers compute with
// them (Megatron's param.data: the bf16 copy under --bf16), converted to fp32, and gathers the
// hashes of the ranks holding the same tensors: the data-parallel group, and for a mixture's
// routed experts the expert-data-parallel group.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dist/communicator.hpp"
#include "model/gpt_parameters.hpp"

namespace mgt {

// A 64-bit hash of the values' fp32 bit patterns: equal values give equal hashes, and one flipped
// bit changes the hash.
std::uint64_t hash_values(std::span<const float> values, std::uint64_t seed = 0);

// The names of the tensors whose hash differs between the ranks of their group: the same list on
// every rank of a group, in the parameters' order. Collective over data_parallel (null: a group
// of one) and, when there are routed experts and it is not null, expert_data_parallel.
std::vector<std::string> tensors_differing_across_replicas(const GptParameters& params,
                                                           dist::Communicator* data_parallel,
                                                           dist::Communicator* expert_data_parallel);

}  // namespace mgt
