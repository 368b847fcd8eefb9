#include "model/moe_buffers.hpp"

#include <algorithm>

namespace mgt {

int64_t moe_capacity(const MoeConfig& moe, int64_t tokens) {
  if (!moe.drops_tokens()) return -1;
  return expert_capacity(tokens * moe.topk, moe.num_experts, moe.capacity_factor, tokens);
}

int64_t moe_row_capacity(const MoeConfig& moe, int64_t tokens, int64_t shards) {
  const int64_t capacity = moe_capacity(moe, tokens / shards);
  return capacity < 0 ? capacity : shards * capacity;
}

int64_t moe_expert_row_multiple(const GptConfig& config) { return config.fp8 ? 16 : 1; }

MoeBufferSizes moe_buffer_sizes(const GptConfig& config, int64_t seq, int64_t batch) {
  const MoeConfig& m = config.moe;
  MoeBufferSizes s;
  s.tokens = seq * batch;
  s.experts = m.num_experts;
  s.topk = m.topk;
  s.hidden = config.hidden_size;
  const int64_t capacity = moe_row_capacity(m, s.tokens, std::max<int64_t>(1, m.sequence_parallel_size));
  const int64_t routed = s.tokens * m.topk;
  s.max_rows = capacity < 0 ? routed
               : m.pad_to_capacity ? capacity * m.num_experts
                                   : std::min(routed, capacity * m.num_experts);
  const int64_t gated = config.gated_linear_unit() ? 2 : 1;
  s.ffn = m.ffn_hidden_size;
  s.fc1 = gated * s.ffn;
  s.shared_ffn = m.shared_expert_intermediate_size;
  s.shared_fc1 = gated * s.shared_ffn;
  s.shared_gate = m.shared_expert_gate && s.shared_ffn > 0;
  s.aux_groups = m.load_balancing == MoeLoadBalancing::kSeqAuxLoss ? batch : 1;
  s.ep = std::max<int64_t>(1, m.expert_model_parallel_size);
  s.replicas = std::max<int64_t>(1, m.expert_row_replicas);
  const int64_t ranks = s.exchange_ranks();
  s.sequence_parallel = m.sequence_parallel_size > 1;
  s.gathers = ranks > 1 && m.dispatcher == MoeDispatcher::kAllgather;
  s.dispatch_tokens = s.gathers ? ranks * s.tokens : s.tokens;
  if (ranks == 1) {
    s.expert_rows = s.max_rows;
  } else {
    const int64_t local = m.num_experts / s.ep;
    const int64_t to_local = s.tokens * std::min(m.topk, local);
    const int64_t per_rank = capacity < 0          ? to_local
                             : m.pad_to_capacity ? capacity * local
                                                 : std::min(to_local, capacity * local);
    s.expert_rows = ranks * per_rank;
    // Gathered, the tokens this rank permutes are those of its experts only.
    if (s.gathers) s.max_rows = s.expert_rows;
  }
  // Each expert's rows (each rank's rows for each expert, under the all-to-all) padded to the
  // row multiple: at most multiple − 1 zero rows more per expert, every expert's rows reaching
  // the local experts under expert parallelism.
  const int64_t padding = (moe_expert_row_multiple(config) - 1) * m.num_experts;
  s.max_rows += padding;
  s.expert_rows += padding;
  return s;
}

int64_t MoeBufferSizes::activation_floats() const {
  const bool exchanges = exchange_ranks() > 1 && !gathers;
  return 3 * tokens * experts + aux_groups * experts + max_rows + max_rows * 2 * hidden +
         expert_rows * (fc1 + ffn) + (exchanges ? expert_rows * hidden : 0) + tokens * (shared_fc1 + shared_ffn) +
         (shared_gate ? tokens * (3 + hidden) : 0);
}

int64_t MoeBufferSizes::activation_indices() const {
  const bool exchanges = exchange_ranks() > 1 && !gathers;
  return 2 * max_rows + dispatch_tokens * topk + dispatch_tokens * experts + experts + 1 +
         (exchanges ? replicas * experts + 2 * expert_rows : 0) +
         (exchanges && replicas > 1 ? 2 * replicas * max_rows : 0);
}

int64_t MoeBufferSizes::scratch_floats() const {
  return (shared_ffn > 0 ? tokens * hidden : 0) + 3 * tokens * experts + max_rows + 2 * max_rows * hidden +
         std::max(expert_rows * ffn, tokens * shared_ffn) + std::max(expert_rows * fc1, tokens * shared_fc1) +
         tokens * hidden + (exchange_ranks() > 1 && !gathers ? 3 * expert_rows * hidden : 0) +
         (exchange_ranks() > 1 && !gathers && replicas > 1 ? replicas * max_rows * hidden : 0) +
         (sequence_parallel ? 2 * tokens * hidden : 0) + (gathers ? dispatch_tokens * (hidden + 2 * experts) : 0);
}

MoeBuffers::MoeBuffers(Backend& backend, const MoeBufferSizes& sizes, bool training)
    : floats_(backend, sizes.activation_floats() + sizes.scratch_floats()),
      indices_(backend, sizes.activation_indices()) {
  int64_t next_float = 0;
  int64_t next_index = 0;
  auto take = [&](int64_t n) {
    FloatView v = floats_.view().subspan(next_float, n);
    next_float += n;
    return v;
  };
  auto take_index = [&](int64_t n) {
    IndexView v = indices_.view().subspan(next_index, n);
    next_index += n;
    return v;
  };
  activations_ = take_moe_activations(sizes, take, take, take_index);
  scratch_ = take_moe_scratch(sizes, take, take, training);
}

}  // namespace mgt
