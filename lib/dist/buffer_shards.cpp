#include "dist/buffer_shards.hpp"

#include "core/error.hpp"

namespace mgt {

namespace {

// The evenly split prefix (ranks · ⌊n/ranks⌋ elements) and the remainder the last rank owns.
struct ShardSplit {
  std::int64_t per_rank = 0;
  std::int64_t even = 0;  // elements in the evenly split prefix
};

ShardSplit split_of(std::int64_t buffer_size, int ranks) {
  if (ranks <= 0 || buffer_size < 0) throw Error("internal error: bad buffer shard request");
  const std::int64_t per_rank = buffer_size / ranks;
  return {per_rank, per_rank * ranks};
}

}  // namespace

BufferShard data_parallel_shard(std::int64_t buffer_size, int ranks, int rank) {
  const ShardSplit s = split_of(buffer_size, ranks);
  if (rank < 0 || rank >= ranks) throw Error("internal error: shard of rank " + std::to_string(rank) +
                                             " in a group of " + std::to_string(ranks));
  const std::int64_t begin = rank * s.per_rank;
  return {begin, rank == ranks - 1 ? buffer_size : begin + s.per_rank};
}

void reduce_scatter_shards(dist::Communicator& group, FloatView buffer) {
  if (group.size() == 1) return;
  const ShardSplit s = split_of(buffer.size(), group.size());
  // In place: this rank's chunk of the evenly split prefix receives its reduction.
  if (s.per_rank > 0)
    group.reduce_scatter(ConstFloatView(buffer.first(s.even)),
                         buffer.subspan(group.rank() * s.per_rank, s.per_rank), dist::ReduceOp::Sum);
  // The remainder is fewer elements than ranks: summed everywhere, kept by the last rank.
  if (s.even < buffer.size()) group.all_reduce(buffer.subspan(s.even, buffer.size() - s.even), dist::ReduceOp::Sum);
}

void all_gather_shards(dist::Communicator& group, FloatView buffer) {
  if (group.size() == 1) return;
  const ShardSplit s = split_of(buffer.size(), group.size());
  if (s.per_rank > 0)
    group.all_gather(ConstFloatView(buffer.subspan(group.rank() * s.per_rank, s.per_rank)),
                     buffer.first(s.even));
  if (s.even < buffer.size()) group.broadcast(buffer.subspan(s.even, buffer.size() - s.even), group.size() - 1);
}

}  // namespace mgt
