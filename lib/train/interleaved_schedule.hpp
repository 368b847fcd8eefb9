// Megatron's interleaved (virtual-stage) 1F1B schedule (megatron/core/pipeline_parallel/
// schedules.py, forward_backward_pipelining_with_interleaving, its path without
// --overlap-p2p-communication's asynchronous receives) as a pure function: the ordered actions of
// one pipeline rank for one iteration of M micro-batches over V model chunks.
//
// Rank p of P holds V chunks; chunk v is virtual stage v·P + p, so activations go around the
// pipeline ring V times: rank P − 1's chunk v feeds rank 0's chunk v + 1. The rank runs its
// M·V "virtual micro-batches" k in the order of get_schedule_table: groups of G micro-batches
// (--microbatch-group-size-per-virtual-pipeline-stage, default P), each group through chunk 0,
// then chunk 1, …; backward k runs chunk V − 1 − chunk(k) on the same micro-batch. Rank p first
// runs min(2·(P − p − 1) + (V − 1)·G, M·V) forwards (get_pp_rank_microbatches), then alternates
// one forward and one backward, then runs the remaining backwards.
//
// After each forward and backward comes Megatron's exchange with the neighbours: the output just
// computed to the next rank, the input gradient just computed to the previous rank, and what the
// next virtual micro-batch needs from them (recv_tensor_from_previous_stage decides which chunk a
// received tensor belongs to). A received tensor of chunk c is the next micro-batch of c in
// arrival order, since each chunk runs its micro-batches in order.
//
// Evaluation runs every virtual micro-batch's forward (all warm-up).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mgt {

// One micro-batch on one model chunk; chunk −1: nothing.
struct ChunkMicrobatch {
  std::int64_t chunk = -1;
  std::int64_t microbatch = -1;

  bool present() const { return chunk >= 0; }
  bool operator==(const ChunkMicrobatch&) const = default;
};

enum class InterleavedOp {
  kForward,   // forward `target`
  kBackward,  // backward `target`
  kExchange,  // the p2p call: the present halves of send/recv forward/backward
};

struct InterleavedAction {
  InterleavedOp op = InterleavedOp::kForward;
  ChunkMicrobatch target;         // forward and backward
  ChunkMicrobatch send_forward;   // this chunk's output, to the next rank
  ChunkMicrobatch recv_forward;   // this chunk's input, from the previous rank
  ChunkMicrobatch send_backward;  // this chunk's input gradient, to the previous rank
  ChunkMicrobatch recv_backward;  // this chunk's output gradient, from the next rank

  bool operator==(const InterleavedAction&) const = default;
};

struct InterleavedShape {
  std::int64_t pipeline_size = 1;    // P
  std::int64_t virtual_size = 1;     // V: model chunks per rank
  std::int64_t microbatches = 1;     // M
  std::int64_t group_size = 0;       // G; 0: P (Megatron's default)

  std::int64_t group() const { return group_size > 0 ? group_size : pipeline_size; }
};

// Megatron's checks of the schedule's shape (schedules.py): G within [P, M] and the last group
// of M mod G micro-batches either empty or at least P. Throws a UsageError naming the flags.
void check_interleaved_shape(const InterleavedShape& shape);

// Megatron's get_schedule_table: the (chunk, micro-batch) of each forward virtual micro-batch.
std::vector<ChunkMicrobatch> interleaved_forward_order(const InterleavedShape& shape);

// Megatron's num_warmup_microbatches of rank `rank` for training.
std::int64_t interleaved_warmup_microbatches(const InterleavedShape& shape, std::int64_t rank);

// The training actions of `rank`; checks the shape first.
std::vector<InterleavedAction> interleaved_schedule(const InterleavedShape& shape, std::int64_t rank);

// Evaluation: forwards only, with the exchanges that move the outputs along.
std::vector<InterleavedAction> interleaved_forward_only_schedule(const InterleavedShape& shape, std::int64_t rank);

// The forwards and backwards alone: "F0.1" (chunk 0, micro-batch 1), "B1.0", comma-separated.
std::string compute_order(const std::vector<InterleavedAction>& actions);

}  // namespace mgt
