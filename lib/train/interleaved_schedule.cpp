#include "train/interleaved_schedule.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace mgt {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

// One rank's walk through Megatron's loops, appending its actions.
class InterleavedBuilder {
public:
  InterleavedBuilder(const InterleavedShape& shape, std::int64_t rank, bool training)
      : shape_(shape),
        rank_(rank),
        training_(training),
        order_(interleaved_forward_order(shape)),
        total_(static_cast<std::int64_t>(order_.size())),
        received_inputs_(static_cast<std::size_t>(shape.virtual_size), 0),
        received_grads_(static_cast<std::size_t>(shape.virtual_size), 0) {}

  std::vector<InterleavedAction> build() {
    const std::int64_t warmup = training_ ? interleaved_warmup_microbatches(shape_, rank_) : total_;
    const bool all_warmup = warmup >= total_;
    const std::int64_t remaining = total_ - warmup;
    const std::int64_t v_last = shape_.virtual_size - 1;

    // The first chunk's first input (none on the first rank: it reads tokens).
    if (!first_rank()) exchange({}, received_input(0), {}, {});

    for (std::int64_t k = 0; k < warmup; ++k) {
      auto [recv_prev, next_chunk] = recv_from_previous_stage(k, true);
      if (k == total_ - 1) recv_prev = false;
      forward(k);
      const ChunkMicrobatch output = output_to_send(k);
      const ChunkMicrobatch input = recv_prev ? received_input(next_chunk) : ChunkMicrobatch{};
      if (k == warmup - 1 && training_ && !all_warmup) {
        // send_forward_backward_recv_forward_backward: the first backward's output gradient too.
        const ChunkMicrobatch grad = last_rank() ? ChunkMicrobatch{} : received_grad(v_last);
        exchange(output, input, {}, grad);
      } else {
        exchange(output, input, {}, {});
      }
    }
    for (std::int64_t k = 0; k < remaining; ++k) {
      const std::int64_t forward_k = k + warmup;
      forward(forward_k);
      backward(k);
      const ChunkMicrobatch output = output_to_send(forward_k);
      const ChunkMicrobatch input_grad = input_grad_to_send(k);
      auto [recv_prev, next_forward_chunk] = recv_from_previous_stage(forward_k, true);
      const auto [recv_next, next_backward_chunk] = recv_from_previous_stage(k, false);
      if (k == remaining - 1) recv_prev = false;
      const ChunkMicrobatch input = recv_prev ? received_input(next_forward_chunk) : ChunkMicrobatch{};
      const ChunkMicrobatch grad = recv_next ? received_grad(next_backward_chunk) : ChunkMicrobatch{};
      exchange(output, input, input_grad, grad);
    }
    if (!training_) return std::move(actions_);
    if (all_warmup && !last_rank()) exchange({}, {}, {}, received_grad(v_last));
    for (std::int64_t k = remaining; k < total_; ++k) {
      auto [recv_next, next_chunk] = recv_from_previous_stage(k, false);
      if (k == total_ - 1) recv_next = false;
      backward(k);
      const ChunkMicrobatch input_grad = input_grad_to_send(k);
      exchange({}, {}, input_grad, recv_next ? received_grad(next_chunk) : ChunkMicrobatch{});
    }
    return std::move(actions_);
  }

private:
  bool first_rank() const { return rank_ == 0; }
  bool last_rank() const { return rank_ == shape_.pipeline_size - 1; }

  // get_model_chunk_id
  std::int64_t chunk_of(std::int64_t k, bool forward) const {
    const std::int64_t chunk = order_[static_cast<std::size_t>(k % total_)].chunk;
    return forward ? chunk : shape_.virtual_size - 1 - chunk;
  }
  ChunkMicrobatch forward_target(std::int64_t k) const { return order_[static_cast<std::size_t>(k)]; }
  ChunkMicrobatch backward_target(std::int64_t k) const {
    return {chunk_of(k, false), order_[static_cast<std::size_t>(k)].microbatch};
  }

  // recv_tensor_from_previous_stage: whether the exchange after virtual micro-batch k receives
  // (an input going forward, an output gradient going backward), and for which chunk.
  std::pair<bool, std::int64_t> recv_from_previous_stage(std::int64_t k, bool forward) const {
    const std::int64_t p = shape_.pipeline_size;
    const bool leading = forward ? first_rank() : last_rank();
    const std::int64_t last_chunk = forward ? shape_.virtual_size - 1 : 0;
    if (!leading) return {true, chunk_of(k + 1, forward)};
    // The leading rank is P − 1 virtual micro-batches ahead of the ending one, whose output
    // (of the chunk before) it receives.
    bool recv = true;
    std::int64_t next = 0;
    if (k < p - 1) {
      recv = false;
      next = chunk_of(k + 1, forward);
    } else {
      next = chunk_of(k - (p - 1), forward);
    }
    if (next == last_chunk) recv = false;
    next += forward ? 1 : -1;
    return {recv, next};
  }

  ChunkMicrobatch output_to_send(std::int64_t k) const {
    const ChunkMicrobatch t = forward_target(k);
    return last_rank() && t.chunk == shape_.virtual_size - 1 ? ChunkMicrobatch{} : t;
  }
  ChunkMicrobatch input_grad_to_send(std::int64_t k) const {
    const ChunkMicrobatch t = backward_target(k);
    return first_rank() && t.chunk == 0 ? ChunkMicrobatch{} : t;
  }
  ChunkMicrobatch received_input(std::int64_t chunk) {
    return {chunk, received_inputs_[static_cast<std::size_t>(chunk)]++};
  }
  ChunkMicrobatch received_grad(std::int64_t chunk) {
    return {chunk, received_grads_[static_cast<std::size_t>(chunk)]++};
  }

  void forward(std::int64_t k) { actions_.push_back({InterleavedOp::kForward, forward_target(k), {}, {}, {}, {}}); }
  void backward(std::int64_t k) { actions_.push_back({InterleavedOp::kBackward, backward_target(k), {}, {}, {}, {}}); }
  void exchange(ChunkMicrobatch send_forward, ChunkMicrobatch recv_forward, ChunkMicrobatch send_backward,
                ChunkMicrobatch recv_backward) {
    if (!send_forward.present() && !recv_forward.present() && !send_backward.present() && !recv_backward.present())
      return;
    actions_.push_back({InterleavedOp::kExchange, {}, send_forward, recv_forward, send_backward, recv_backward});
  }

  const InterleavedShape& shape_;
  std::int64_t rank_;
  bool training_;
  std::vector<ChunkMicrobatch> order_;
  std::int64_t total_;
  std::vector<std::int64_t> received_inputs_;
  std::vector<std::int64_t> received_grads_;
  std::vector<InterleavedAction> actions_;
};

void check_rank(const InterleavedShape& shape, std::int64_t rank) {
  if (rank < 0 || rank >= shape.pipeline_size)
    throw Error("interleaved schedule: rank " + str(rank) + " is outside a pipeline of " + str(shape.pipeline_size));
}

}  // namespace

void check_interleaved_shape(const InterleavedShape& s) {
  if (s.pipeline_size < 2 || s.virtual_size < 2 || s.microbatches < 1 || s.group_size < 0)
    throw Error("interleaved schedule: " + str(s.virtual_size) + " chunks over " + str(s.pipeline_size) + " ranks with " +
                str(s.microbatches) + " micro-batches is out of range");
  const std::int64_t g = s.group();
  if (g > s.microbatches || g < s.pipeline_size)
    throw UsageError("--microbatch-group-size-per-virtual-pipeline-stage (" + str(g) +
                     (s.group_size > 0 ? "" : ", the default: --pipeline-model-parallel-size") +
                     ") must lie between --pipeline-model-parallel-size (" + str(s.pipeline_size) +
                     ") and the number of micro-batches per iteration (" + str(s.microbatches) +
                     ") with the interleaved schedule");
  const std::int64_t last_group = s.microbatches % g;
  if (last_group > 0 && last_group < s.pipeline_size)
    throw UsageError("the number of micro-batches per iteration (" + str(s.microbatches) +
                     ") modulo --microbatch-group-size-per-virtual-pipeline-stage (" + str(g) + ") is " +
                     str(last_group) + ": it must be 0 or at least --pipeline-model-parallel-size (" +
                     str(s.pipeline_size) + ") with the interleaved schedule");
}

std::vector<ChunkMicrobatch> interleaved_forward_order(const InterleavedShape& s) {
  const std::int64_t g = s.group();
  std::vector<ChunkMicrobatch> order;
  for (std::int64_t first = 0; first < s.microbatches; first += g) {
    // The last group takes every micro-batch left (get_schedule_table).
    const std::int64_t end = first + g >= s.microbatches ? s.microbatches : first + g;
    for (std::int64_t chunk = 0; chunk < s.virtual_size; ++chunk)
      for (std::int64_t mb = first; mb < end; ++mb) order.push_back({chunk, mb});
  }
  return order;
}

std::int64_t interleaved_warmup_microbatches(const InterleavedShape& s, std::int64_t rank) {
  check_rank(s, rank);
  const std::int64_t warmup = (s.pipeline_size - rank - 1) * 2 + (s.virtual_size - 1) * s.group();
  return std::min(warmup, s.microbatches * s.virtual_size);
}

std::vector<InterleavedAction> interleaved_schedule(const InterleavedShape& shape, std::int64_t rank) {
  check_interleaved_shape(shape);
  check_rank(shape, rank);
  return InterleavedBuilder(shape, rank, true).build();
}

std::vector<InterleavedAction> interleaved_forward_only_schedule(const InterleavedShape& shape, std::int64_t rank) {
  check_interleaved_shape(shape);
  check_rank(shape, rank);
  return InterleavedBuilder(shape, rank, false).build();
}

std::string compute_order(const std::vector<InterleavedAction>& actions) {
  std::string text;
  for (const InterleavedAction& a : actions) {
    if (a.op == InterleavedOp::kExchange) continue;
    text += text.empty() ? "" : ", ";
    text += (a.op == InterleavedOp::kForward ? "F" : "B") + str(a.target.chunk) + "." + str(a.target.microbatch);
  }
  return text;
}

}  // namespace mgt
