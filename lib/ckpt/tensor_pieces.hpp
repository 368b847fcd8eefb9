// Where a stored piece of a tensor lies in the whole tensor. A tensor-parallel piece is its
// rank's slice of every chunk along the partitioned dimension (Megatron's ColumnParallelLinear
// and RowParallelLinear splits, megatron/core/tensor_parallel/layers.py; SwiGLU's fc1 as two
// chunks, tools/checkpoint/loader_base.py); a flat range is a run of a piece's row-major
// elements (the distributed optimizer's shard, megatron/core/optimizer/distrib_optimizer.py).
// Byte-level, so any element type moves the same way.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "ckpt/tensor_record.hpp"

namespace mgt::ckpt {

// Copies `piece` (the row-major piece `partition` names) into its places in `whole`.
void place_piece(const TensorPartition& partition, std::span<const std::int64_t> global_shape,
                 std::size_t element_size, std::span<const std::byte> piece, std::span<std::byte> whole);

// The inverse: fills `piece` from `whole`.
void cut_piece(const TensorPartition& partition, std::span<const std::int64_t> global_shape,
               std::size_t element_size, std::span<const std::byte> whole, std::span<std::byte> piece);

std::int64_t element_count(std::span<const std::int64_t> shape);

}  // namespace mgt::ckpt
