#include "model/context_parallel_split.hpp"

#include <span>
#include <string>

#include "core/error.hpp"

namespace mgt {
namespace {

// The chosen columns of each row of a [b, s] array.
template <typename T>
std::vector<T> take_columns(std::span<const T> values, int64_t batch, int64_t seq,
                            const std::vector<int64_t>& columns) {
  std::vector<T> out;
  if (values.empty()) return out;
  out.reserve(static_cast<std::size_t>(batch) * columns.size());
  for (int64_t b = 0; b < batch; ++b)
    for (const int64_t c : columns) out.push_back(values[static_cast<std::size_t>(b * seq + c)]);
  return out;
}

}  // namespace

void check_context_parallel_sequence(int64_t seq_length, int64_t size) {
  if (size < 1) throw UsageError("--context-parallel-size must be a positive integer, not " + std::to_string(size));
  if (size > 1 && seq_length % (2 * size) != 0)
    throw UsageError("--seq-length (" + std::to_string(seq_length) +
                     ") must be divisible by 2 x --context-parallel-size (" + std::to_string(2 * size) +
                     "): each sequence is cut into 2 x context-parallel-size equal chunks");
}

std::vector<int64_t> context_parallel_positions(int64_t seq_length, int64_t size, int64_t rank) {
  check_context_parallel_sequence(seq_length, size);
  if (rank < 0 || rank >= size)
    throw Error("context-parallel rank " + std::to_string(rank) + " is outside a group of " + std::to_string(size));
  if (size == 1) {
    std::vector<int64_t> all(static_cast<std::size_t>(seq_length));
    for (int64_t i = 0; i < seq_length; ++i) all[static_cast<std::size_t>(i)] = i;
    return all;
  }
  const int64_t chunk = seq_length / (2 * size);
  std::vector<int64_t> positions;
  positions.reserve(static_cast<std::size_t>(2 * chunk));
  for (const int64_t c : {rank, 2 * size - 1 - rank})
    for (int64_t i = 0; i < chunk; ++i) positions.push_back(c * chunk + i);
  return positions;
}

MicroBatch ContextParallelBatch::view() const {
  MicroBatch m;
  m.batch_size = batch_size;
  m.seq_length = seq_length;
  m.tokens = tokens;
  m.position_ids = position_ids;
  m.labels = labels;
  m.loss_mask = loss_mask;
  return m;
}

ContextParallelBatch split_for_context_parallel_rank(const MicroBatch& batch, int64_t size, int64_t rank) {
  const std::vector<int64_t> columns = context_parallel_positions(batch.seq_length, size, rank);
  const int64_t b = batch.batch_size, s = batch.seq_length;
  ContextParallelBatch out;
  out.batch_size = b;
  out.seq_length = static_cast<int64_t>(columns.size());
  out.tokens = take_columns(batch.tokens, b, s, columns);
  if (batch.position_ids.empty()) {
    for (int64_t r = 0; r < b; ++r) out.position_ids.insert(out.position_ids.end(), columns.begin(), columns.end());
  } else {
    out.position_ids = take_columns(batch.position_ids, b, s, columns);
  }
  out.labels = take_columns(batch.labels, b, s, columns);
  out.loss_mask = take_columns(batch.loss_mask, b, s, columns);
  return out;
}

}  // namespace mgt
