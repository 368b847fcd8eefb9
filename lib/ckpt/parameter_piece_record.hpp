// The records a rank stores for its piece of a model parameter (or of an optimizer state of
// it): the tensor-parallel split from the parameter table (dim, rank, count, and the chunks of
// SwiGLU's fc1), so that any layout can read it back (sharded_checkpoint.hpp).
#pragma once
#include <cstdint>
#include <string>

#include "ckpt/tensor_record.hpp"
#include "model/parameter_table.hpp"

namespace mgt::ckpt {

// Rank tp's whole piece of the parameter `e` (e is that rank's table entry), fp32.
TensorRecord parameter_piece_record(std::string path, const ParameterEntry& e, const TensorParallelRank& tp);

// Elements [offset, offset + length) of that piece, flattened: a distributed-optimizer shard.
TensorRecord parameter_range_record(std::string path, const ParameterEntry& e, const TensorParallelRank& tp,
                                    std::int64_t offset, std::int64_t length);

}  // namespace mgt::ckpt
