// How the distributed optimizer splits the model's flat buffers over the data-parallel group, and
// the two collectives that move between whole buffers and shards.
//
// Megatron (megatron/core/distributed/param_and_grad_buffer.py, distrib_optimizer.py) gives each
// data-parallel rank one contiguous 1/dp of every bucket; without --overlap-grad-reduce all
// parameters form one bucket, so each rank owns one contiguous range of the whole buffer. mgt keeps
// that layout over the model's own flat buffer. Megatron pads the bucket to a multiple of dp; the
// model's buffers are not padded, so the first dp·⌊n/dp⌋ elements are split evenly and the last
// rank also owns the n mod dp elements left over — none when dp divides 64, the parameter
// alignment (model/parameter_table.hpp), which covers every power of two up to 64.
#pragma once
#include <cstdint>

#include "dist/communicator.hpp"
#include "kernels/backend.hpp"

namespace mgt {

struct BufferShard {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end - begin; }
};

// Rank `rank`'s range of a buffer of `buffer_size` elements split over `ranks` ranks.
BufferShard data_parallel_shard(std::int64_t buffer_size, int ranks, int rank);

// Collective over `group`: afterwards this rank's shard of `buffer` holds the element-wise sum of
// every rank's buffer over that shard. The rest of the buffer is left partly reduced: only the
// shard is meaningful.
void reduce_scatter_shards(dist::Communicator& group, FloatView buffer);

// Collective over `group`: afterwards every rank's `buffer` holds, in each rank's shard, that
// rank's values.
void all_gather_shards(dist::Communicator& group, FloatView buffer);

}  // namespace mgt
