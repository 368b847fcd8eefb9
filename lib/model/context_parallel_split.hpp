// Megatron's load-balanced split of a micro-batch over the context-parallel ranks
// (megatron/core/utils.py get_batch_on_this_cp_rank): each sequence is cut into 2N chunks of
// s/2N tokens and rank i keeps chunks i and 2N−1−i, in that order, so that every rank's share of
// the causal attention's work is the same (an early chunk sees few keys, a late one many).
// Tokens, labels, loss mask and position ids are split alike; the position ids (0…s−1 when the
// batch gives none) keep the tokens' true positions, which learned position embeddings read, and
// rotary embeddings turn each chunk from its first position (SelfAttention).
#pragma once
#include <cstdint>
#include <vector>

#include "model/gpt_model.hpp"

namespace mgt {

// Throws a UsageError unless 2·size divides seq_length (arguments.py's rule for context
// parallelism: the sequence length must be divisible by 2 × context-parallel size).
void check_context_parallel_sequence(int64_t seq_length, int64_t size);

// The positions of the sequence rank `rank` of `size` holds, in its order: chunks rank and
// 2·size − 1 − rank.
std::vector<int64_t> context_parallel_positions(int64_t seq_length, int64_t size, int64_t rank);

// One rank's part of a micro-batch, owning its arrays.
struct ContextParallelBatch {
  int64_t batch_size = 0;
  int64_t seq_length = 0;  // s / size
  std::vector<int64_t> tokens;
  std::vector<int64_t> position_ids;  // always given: the true positions
  std::vector<int64_t> labels;        // empty when the batch has none
  std::vector<float> loss_mask;       // empty when the batch has none

  MicroBatch view() const;
};

ContextParallelBatch split_for_context_parallel_rank(const MicroBatch& batch, int64_t size, int64_t rank);

}  // namespace mgt
