#include "model/moe_token_dispatcher.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace mgt {

MoeTokenDispatcher::MoeTokenDispatcher(Backend& backend, const MoeConfig& moe, int64_t hidden,
                                       dist::Communicator* expert_group, int64_t row_multiple)
    : backend_(&backend),
      moe_(moe),
      hidden_(hidden),
      group_(expert_group && expert_group->size() > 1 ? expert_group : nullptr),
      row_multiple_(row_multiple) {
  if (row_multiple < 1)
    throw Error("internal error: expert rows padded to a multiple of " + std::to_string(row_multiple));
  if (group_ && moe_.num_experts % group_->size() != 0)
    throw Error("internal error: " + std::to_string(moe_.num_experts) + " experts over " +
                std::to_string(group_->size()) + " expert-parallel ranks");
}

std::vector<int64_t> MoeTokenDispatcher::dispatch(ConstFloatView input, int64_t tokens, int64_t capacity,
                                                  const MoeActivations& saved) const {
  const int64_t E = moe_.num_experts;
  return permute(input, tokens, saved.routing_map.first(tokens * E), saved.probs.first(tokens * E), 0, E, capacity,
                 saved);
}

std::vector<int64_t> MoeTokenDispatcher::dispatch(ConstFloatView input, int64_t tokens, ConstFloatView routing_map,
                                                  ConstFloatView probs, int64_t capacity,
                                                  const MoeActivations& saved) const {
  return permute(input, tokens, routing_map, probs, 0, moe_.num_experts, capacity, saved);
}

std::vector<int64_t> MoeTokenDispatcher::dispatch_local(ConstFloatView input, int64_t tokens,
                                                        ConstFloatView routing_map, ConstFloatView probs,
                                                        int64_t capacity, const MoeActivations& saved) const {
  return permute(input, tokens, routing_map, probs, first_local_expert(), local_experts(), capacity, saved);
}

std::vector<int64_t> MoeTokenDispatcher::permute(ConstFloatView input, int64_t tokens, ConstFloatView routing_map,
                                                 ConstFloatView probs, int64_t first, int64_t count,
                                                 int64_t capacity, const MoeActivations& saved) const {
  const int64_t E = moe_.num_experts;
  const int64_t k = moe_.topk;
  std::vector<float> map(static_cast<std::size_t>(tokens * E));
  backend_->copy_to_host(routing_map.first(tokens * E), std::span<float>(map));

  std::vector<int64_t> row_token, row_slot;
  std::vector<int64_t> token_rows(static_cast<std::size_t>(tokens * k), -1);
  std::vector<int64_t> slot_row(static_cast<std::size_t>(tokens * E), -1);
  std::vector<int64_t> rows_of(static_cast<std::size_t>(count), 0);
  std::vector<int64_t> filled(static_cast<std::size_t>(tokens), 0);
  for (int64_t e = first; e < first + count; ++e) {
    const int64_t first_row = static_cast<int64_t>(row_token.size());
    for (int64_t t = 0; t < tokens; ++t) {
      if (map[static_cast<std::size_t>(t * E + e)] <= 0.0f) continue;
      const int64_t r = static_cast<int64_t>(row_token.size());
      if (filled[static_cast<std::size_t>(t)] >= k) throw Error("MoE routing: a token has more than topk experts");
      token_rows[static_cast<std::size_t>(t * k + filled[static_cast<std::size_t>(t)]++)] = r;
      slot_row[static_cast<std::size_t>(t * E + e)] = r;
      row_token.push_back(t);
      row_slot.push_back(t * E + e);
    }
    // Megatron pads each expert's input to its capacity with tokens of probability 0, which add
    // nothing to the output or to any gradient; zero rows do the same.
    // FP8: the rows padded on to a multiple of 16 (moe_expert_row_multiple) the same way, as
    // Megatron's experts pad their input with zeros (experts.py _pad_tensor_for_fp8).
    const int64_t routed = static_cast<int64_t>(row_token.size()) - first_row;
    const int64_t padded = (std::max(routed, capacity) + row_multiple_ - 1) / row_multiple_ * row_multiple_;
    while (static_cast<int64_t>(row_token.size()) - first_row < padded) {
      row_token.push_back(-1);
      row_slot.push_back(-1);
    }
    rows_of[static_cast<std::size_t>(e - first)] = static_cast<int64_t>(row_token.size()) - first_row;
  }
  const int64_t rows = static_cast<int64_t>(row_token.size());
  if (rows > saved.row_token.size()) throw Error("MoE routing: more expert rows than the buffers hold");
  backend_->copy_from_host<int64_t>(row_token, saved.row_token.first(rows));
  backend_->copy_from_host<int64_t>(row_slot, saved.row_slot.first(rows));
  backend_->copy_from_host<int64_t>(token_rows, saved.token_rows.first(tokens * k));
  backend_->copy_from_host<int64_t>(slot_row, saved.slot_row.first(tokens * E));
  backend_->copy_from_host<int64_t>(rows_of, saved.expert_rows.first(count));
  // The probability of each row: probs[t, e] gathered by t·E + e.
  backend_->gather_rows(probs.first(tokens * E), tokens * E, 1, saved.row_slot.first(rows), {},
                        saved.row_weights.first(rows));
  backend_->gather_rows(input, tokens, hidden_, saved.row_token.first(rows), {}, saved.permuted.first(rows * hidden_));
  return rows_of;
}

void MoeTokenDispatcher::combine(int64_t tokens, int64_t rows, const MoeActivations& saved, FloatView output) const {
  backend_->gather_sum_rows(saved.expert_output.first(rows * hidden_), rows, hidden_,
                            saved.token_rows.first(tokens * moe_.topk), moe_.topk, saved.row_weights.first(rows),
                            output);
}

void MoeTokenDispatcher::combine_backward(ConstFloatView d_output, int64_t tokens, int64_t rows,
                                          const MoeActivations& saved, const MoeScratch& scratch,
                                          FloatView d_probs) const {
  const int64_t E = moe_.num_experts;
  const FloatView d_rows = scratch.d_rows.first(rows * hidden_);
  // ∂/∂row_weight[r] = expert_output[r] · d_output[token of r].
  backend_->gather_rows(d_output, tokens, hidden_, saved.row_token.first(rows), {}, d_rows);
  backend_->row_dot(saved.expert_output.first(rows * hidden_), d_rows, rows, hidden_, scratch.d_row_weights.first(rows));
  // ∂/∂probs[t, e] = that of (t, e)'s row, 0 where not routed.
  backend_->gather_rows(scratch.d_row_weights.first(rows), rows, 1, saved.slot_row.first(tokens * E), {},
                        d_probs.first(tokens * E));
  // ∂/∂expert_output[r] = row_weight[r] · d_output[token of r].
  backend_->gather_rows(d_output, tokens, hidden_, saved.row_token.first(rows), saved.row_weights.first(rows), d_rows);
}

void MoeTokenDispatcher::dispatch_backward(ConstFloatView d_permuted, int64_t tokens, int64_t rows,
                                           const MoeActivations& saved, FloatView d_input) const {
  backend_->gather_sum_rows(d_permuted, rows, hidden_, saved.token_rows.first(tokens * moe_.topk), moe_.topk, {},
                            d_input);
}

ExpertExchange MoeTokenDispatcher::exchange_from_counts(const std::vector<int64_t>& rows_of,
                                                       const std::vector<int64_t>& counts) const {
  const int ep = group_->size();
  const int64_t local = moe_.num_experts / ep;
  ExpertExchange x;
  x.send_rows.assign(static_cast<std::size_t>(ep), 0);
  x.recv_rows.assign(static_cast<std::size_t>(ep), 0);
  x.expert_rows.assign(static_cast<std::size_t>(local), 0);
  for (int r = 0; r < ep; ++r)
    for (int64_t j = 0; j < local; ++j) {
      x.send_rows[static_cast<std::size_t>(r)] += rows_of[static_cast<std::size_t>(r * local + j)];
      const int64_t c = counts[static_cast<std::size_t>(r * local + j)];
      x.recv_rows[static_cast<std::size_t>(r)] += c;
      x.expert_rows[static_cast<std::size_t>(j)] += c;
    }
  for (int r = 0; r < ep; ++r) {
    x.rows += x.send_rows[static_cast<std::size_t>(r)];
    x.received += x.recv_rows[static_cast<std::size_t>(r)];
  }
  return x;
}

ExpertExchange MoeTokenDispatcher::plan_exchange(const std::vector<int64_t>& rows_of,
                                                 const MoeActivations& saved) const {
  const int ep = group_->size();
  const int64_t local = moe_.num_experts / ep;
  // Megatron's preprocess: every rank learns how many rows each rank sends each of its experts
  // (num_global_tokens_per_local_expert): chunk r of the rows per expert goes to rank r.
  std::vector<int64_t> counts(static_cast<std::size_t>(moe_.num_experts));
  const std::vector<int64_t> chunk(static_cast<std::size_t>(ep), local);
  group_->all_to_all(dist::host_buffer(std::span<const int64_t>(rows_of)), chunk,
                     dist::host_buffer(std::span<int64_t>(counts)), chunk);
  ExpertExchange x = exchange_from_counts(rows_of, counts);
  if (x.received > saved.ep_sort.size())
    throw Error("MoE routing: the local experts receive more rows than the buffers hold");
  // sort_chunks_by_idxs: the received chunks (source rank, local expert) in the order (local
  // expert, source rank); ep_unsort is the inverse permutation.
  std::vector<int64_t> first(static_cast<std::size_t>(moe_.num_experts));  // received row of chunk (r, j)
  int64_t next = 0;
  for (int r = 0; r < ep; ++r)
    for (int64_t j = 0; j < local; ++j) {
      first[static_cast<std::size_t>(r * local + j)] = next;
      next += counts[static_cast<std::size_t>(r * local + j)];
    }
  std::vector<int64_t> sort, unsort(static_cast<std::size_t>(x.received));
  sort.reserve(static_cast<std::size_t>(x.received));
  for (int64_t j = 0; j < local; ++j)
    for (int r = 0; r < ep; ++r)
      for (int64_t i = 0; i < counts[static_cast<std::size_t>(r * local + j)]; ++i) {
        const int64_t received_row = first[static_cast<std::size_t>(r * local + j)] + i;
        unsort[static_cast<std::size_t>(received_row)] = static_cast<int64_t>(sort.size());
        sort.push_back(received_row);
      }
  backend_->copy_from_host<int64_t>(counts, saved.ep_counts.first(moe_.num_experts));
  backend_->copy_from_host<int64_t>(sort, saved.ep_sort.first(x.received));
  backend_->copy_from_host<int64_t>(unsort, saved.ep_unsort.first(x.received));
  return x;
}

ExpertExchange MoeTokenDispatcher::saved_exchange(const std::vector<int64_t>& rows_of,
                                                  const MoeActivations& saved) const {
  std::vector<int64_t> counts(static_cast<std::size_t>(moe_.num_experts));
  backend_->copy_to_host(DeviceSpan<const int64_t>(saved.ep_counts.first(moe_.num_experts)),
                         std::span<int64_t>(counts));
  return exchange_from_counts(rows_of, counts);
}

namespace {

std::vector<int64_t> times(const std::vector<int64_t>& rows, int64_t width) {
  std::vector<int64_t> elements(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) elements[i] = rows[i] * width;
  return elements;
}

}  // namespace

void MoeTokenDispatcher::to_experts(const ExpertExchange& x, ConstFloatView rows, const MoeActivations& saved,
                                    FloatView exchange, FloatView sorted) const {
  const FloatView received = exchange.first(x.received * hidden_);
  group_->all_to_all(rows.first(x.rows * hidden_), times(x.send_rows, hidden_), received,
                     times(x.recv_rows, hidden_));
  backend_->gather_rows(received, x.received, hidden_, saved.ep_sort.first(x.received), {},
                        sorted.first(x.received * hidden_));
}

void MoeTokenDispatcher::from_experts(const ExpertExchange& x, ConstFloatView sorted, const MoeActivations& saved,
                                      FloatView exchange, FloatView rows) const {
  const FloatView back = exchange.first(x.received * hidden_);
  backend_->gather_rows(sorted.first(x.received * hidden_), x.received, hidden_, saved.ep_unsort.first(x.received), {},
                        back);
  group_->all_to_all(back, times(x.recv_rows, hidden_), rows.first(x.rows * hidden_), times(x.send_rows, hidden_));
}

std::vector<int64_t> MoeTokenDispatcher::expert_rows(const MoeActivations& saved) const {
  const int64_t count = gathers_tokens() ? local_experts() : moe_.num_experts;
  std::vector<int64_t> rows(static_cast<std::size_t>(count));
  backend_->copy_to_host(DeviceSpan<const int64_t>(saved.expert_rows.first(count)), std::span<int64_t>(rows));
  return rows;
}

}  // namespace mgt
