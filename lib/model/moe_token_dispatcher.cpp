#include "model/moe_token_dispatcher.hpp"

#include <algorithm>
#include <memory>
#include <numeric>

#include "core/error.hpp"

namespace mgt {

MoeTokenDispatcher::MoeTokenDispatcher(Backend& backend, const MoeConfig& moe, int64_t hidden,
                                       dist::Communicator* expert_group, int64_t replicas, int64_t row_multiple)
    : backend_(&backend),
      moe_(moe),
      hidden_(hidden),
      group_(expert_group && expert_group->size() > 1 ? expert_group : nullptr),
      replicas_(group_ ? replicas : 1),
      row_multiple_(row_multiple) {
  if (row_multiple < 1)
    throw Error("internal error: expert rows padded to a multiple of " + std::to_string(row_multiple));
  if (replicas_ < 1 || (group_ && (group_->size() % replicas_ != 0 || moe_.num_experts % expert_ranks() != 0)))
    throw Error("internal error: " + std::to_string(moe_.num_experts) + " experts over " +
                std::to_string(group_ ? group_->size() : 1) + " ranks, " + std::to_string(replicas_) +
                " expert-tensor-parallel ranks each");
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

std::span<int64_t> MoeTokenDispatcher::staging(int64_t size) const {
  if (staging_.size() < size) staging_ = PinnedHostArray<int64_t>(*backend_, size);
  return staging_.host().first(static_cast<std::size_t>(size));
}

std::vector<int64_t> MoeTokenDispatcher::permute(ConstFloatView input, int64_t tokens, ConstFloatView routing_map,
                                                 ConstFloatView probs, int64_t first, int64_t count,
                                                 int64_t capacity, const MoeActivations& saved) const {
  const int64_t E = moe_.num_experts;
  const int64_t k = moe_.topk;
  // Megatron pads each expert's input to its capacity with tokens of probability 0, which add
  // nothing to the output or to any gradient; padding rows (index −1, gathered as zeros) do the
  // same. FP8: the rows padded on to a multiple of 16 (moe_expert_row_multiple) the same way, as
  // Megatron's experts pad their input with zeros (experts.py _pad_tensor_for_fp8).
  const int64_t max_rows = saved.row_token.size();
  const IndexView expert_rows = saved.expert_rows.first(count + 1);
  backend_->moe_permutation(routing_map.first(tokens * E), {tokens, E, first, count, k, capacity, row_multiple_},
                            saved.row_token, saved.row_slot, saved.token_rows.first(tokens * k),
                            saved.slot_row.first(tokens * E), expert_rows);
  // The rows per expert come back to the host (the experts' GEMM shapes) while the rows are
  // gathered: without a capacity over every expert, the row tables' length bounds the rows
  // closely, and the gathers run over all of it (rows past the last are zeros) without waiting.
  const std::span<int64_t> counts = staging(count + 1);
  backend_->copy_to_host_async(DeviceSpan<const int64_t>(expert_rows), counts);
  const std::unique_ptr<QueueEvent> counted = backend_->record_event();
  const bool gather_all = count == E && capacity < 0 && max_rows <= tokens * k + count * (row_multiple_ - 1);
  const auto gather = [&](int64_t rows) {
    // The probability of each row: probs[t, e] gathered by t·E + e.
    backend_->gather_rows(probs.first(tokens * E), tokens * E, 1, saved.row_slot.first(rows), {},
                          saved.row_weights.first(rows));
    // --moe-apply-probs-on-input: the rows weighted here (in fp32, rounded once, as Megatron's
    // experts multiply them) instead of in the combine.
    backend_->gather_rows(input, tokens, hidden_, saved.row_token.first(rows),
                          moe_.apply_probs_on_input ? ConstFloatView(saved.row_weights.first(rows)) : ConstFloatView(),
                          saved.permuted.first(rows * hidden_));
  };
  if (gather_all) gather(max_rows);
  counted->wait();
  const int64_t status = counts[static_cast<std::size_t>(count)];
  if (status & kMoePermutationTooManyExperts) throw Error("MoE routing: a token has more than topk experts");
  if (status & kMoePermutationTooManyRows) throw Error("MoE routing: more expert rows than the buffers hold");
  std::vector<int64_t> rows_of(counts.begin(), counts.begin() + count);
  if (!gather_all) gather(std::accumulate(rows_of.begin(), rows_of.end(), int64_t{0}));
  rows_written_[saved.expert_rows.data()] = rows_of;
  return rows_of;
}

void MoeTokenDispatcher::combine(int64_t tokens, int64_t rows, const MoeActivations& saved, FloatView output) const {
  backend_->gather_sum_rows(saved.expert_output.first(rows * hidden_), rows, hidden_,
                            saved.token_rows.first(tokens * moe_.topk), moe_.topk,
                            moe_.apply_probs_on_input ? ConstFloatView() : ConstFloatView(saved.row_weights.first(rows)),
                            output);
}

void MoeTokenDispatcher::combine_backward(ConstFloatView d_output, int64_t tokens, int64_t rows,
                                          const MoeActivations& saved, const MoeScratch& scratch,
                                          FloatView d_probs) const {
  const int64_t E = moe_.num_experts;
  const FloatView d_rows = scratch.d_rows.first(rows * hidden_);
  backend_->gather_rows(d_output, tokens, hidden_, saved.row_token.first(rows), {}, d_rows);
  if (moe_.apply_probs_on_input) {
    // The outputs were added unweighted: d_rows is their gradient, and the probabilities' comes
    // from the input's side (MoeLayer::backward).
    backend_->fill(d_probs.first(tokens * E), 0.0f);
    return;
  }
  // ∂/∂row_weight[r] = expert_output[r] · d_output[token of r].
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
  const int ranks = group_->size();
  const int64_t local = local_experts();
  ExpertExchange x;
  x.send_rows.assign(static_cast<std::size_t>(ranks), 0);
  x.recv_rows.assign(static_cast<std::size_t>(ranks), 0);
  x.expert_rows.assign(static_cast<std::size_t>(local), 0);
  // Group rank r holds the experts of expert-parallel rank r / replicas.
  for (int r = 0; r < ranks; ++r)
    for (int64_t j = 0; j < local; ++j) {
      x.send_rows[static_cast<std::size_t>(r)] += rows_of[static_cast<std::size_t>(r / replicas_ * local + j)];
      const int64_t c = counts[static_cast<std::size_t>(r * local + j)];
      x.recv_rows[static_cast<std::size_t>(r)] += c;
      x.expert_rows[static_cast<std::size_t>(j)] += c;
    }
  for (int64_t n : rows_of) x.rows += n;
  for (int r = 0; r < ranks; ++r) {
    x.sent += x.send_rows[static_cast<std::size_t>(r)];
    x.received += x.recv_rows[static_cast<std::size_t>(r)];
  }
  return x;
}

namespace {

// The rows of each expert-parallel rank's experts: [expert ranks] from the rows of each expert.
std::vector<int64_t> rows_per_rank(const std::vector<int64_t>& rows_of, int64_t local) {
  std::vector<int64_t> rows(rows_of.size() / static_cast<std::size_t>(local), 0);
  for (std::size_t e = 0; e < rows_of.size(); ++e) rows[e / static_cast<std::size_t>(local)] += rows_of[e];
  return rows;
}

}  // namespace

ExpertExchange MoeTokenDispatcher::plan_exchange(const std::vector<int64_t>& rows_of,
                                                 const MoeActivations& saved) const {
  const int ranks = group_->size();
  const int64_t local = local_experts();
  // Megatron's preprocess: every rank learns how many rows each rank sends each of its experts
  // (num_global_tokens_per_local_expert): chunk r of the rows per expert goes to rank r (the
  // rows of expert-parallel rank r / replicas' experts, to each of its expert-tensor ranks).
  std::vector<int64_t> sent_counts(static_cast<std::size_t>(ranks * local));
  for (int r = 0; r < ranks; ++r)
    for (int64_t j = 0; j < local; ++j)
      sent_counts[static_cast<std::size_t>(r * local + j)] = rows_of[static_cast<std::size_t>(r / replicas_ * local + j)];
  std::vector<int64_t> counts(static_cast<std::size_t>(ranks * local));
  const std::vector<int64_t> chunk(static_cast<std::size_t>(ranks), local);
  group_->all_to_all(dist::host_buffer(std::span<const int64_t>(sent_counts)), chunk,
                     dist::host_buffer(std::span<int64_t>(counts)), chunk);
  ExpertExchange x = exchange_from_counts(rows_of, counts);
  if (x.received > saved.ep_sort.size())
    throw Error("MoE routing: the local experts receive more rows than the buffers hold");
  // sort_chunks_by_idxs: the received chunks (source rank, local expert) in the order (local
  // expert, source rank); ep_unsort is the inverse permutation.
  std::vector<int64_t> first(static_cast<std::size_t>(ranks * local));  // received row of chunk (r, j)
  int64_t next = 0;
  for (int r = 0; r < ranks; ++r)
    for (int64_t j = 0; j < local; ++j) {
      first[static_cast<std::size_t>(r * local + j)] = next;
      next += counts[static_cast<std::size_t>(r * local + j)];
    }
  std::vector<int64_t> sort, unsort(static_cast<std::size_t>(x.received));
  sort.reserve(static_cast<std::size_t>(x.received));
  for (int64_t j = 0; j < local; ++j)
    for (int r = 0; r < ranks; ++r)
      for (int64_t i = 0; i < counts[static_cast<std::size_t>(r * local + j)]; ++i) {
        const int64_t received_row = first[static_cast<std::size_t>(r * local + j)] + i;
        unsort[static_cast<std::size_t>(received_row)] = static_cast<int64_t>(sort.size());
        sort.push_back(received_row);
      }
  backend_->copy_from_host<int64_t>(counts, saved.ep_counts.first(ranks * local));
  backend_->copy_from_host<int64_t>(sort, saved.ep_sort.first(x.received));
  backend_->copy_from_host<int64_t>(unsort, saved.ep_unsort.first(x.received));
  if (replicas_ > 1) {
    // The rows as sent: expert-parallel rank q's rows once for each of its expert-tensor ranks
    // (ep_replicate: the row of each sent row), and the places of each row's copies, which come
    // back as the slices' partial outputs (ep_combine: [rows, replicas]).
    if (x.sent > saved.ep_replicate.size()) throw Error("MoE routing: more rows to send than the buffers hold");
    const std::vector<int64_t> per_rank = rows_per_rank(rows_of, local);
    std::vector<int64_t> replicate, combine(static_cast<std::size_t>(x.rows * replicas_));
    replicate.reserve(static_cast<std::size_t>(x.sent));
    int64_t block = 0;  // the first row of expert-parallel rank q's experts
    for (std::size_t q = 0; q < per_rank.size(); ++q) {
      for (int64_t c = 0; c < replicas_; ++c)
        for (int64_t i = 0; i < per_rank[q]; ++i) {
          combine[static_cast<std::size_t>((block + i) * replicas_ + c)] = static_cast<int64_t>(replicate.size());
          replicate.push_back(block + i);
        }
      block += per_rank[q];
    }
    backend_->copy_from_host<int64_t>(replicate, saved.ep_replicate.first(x.sent));
    backend_->copy_from_host<int64_t>(combine, saved.ep_combine.first(x.rows * replicas_));
  }
  return x;
}

ExpertExchange MoeTokenDispatcher::saved_exchange(const std::vector<int64_t>& rows_of,
                                                  const MoeActivations& saved) const {
  const int64_t n = group_->size() * local_experts();
  std::vector<int64_t> counts(static_cast<std::size_t>(n));
  backend_->copy_to_host(DeviceSpan<const int64_t>(saved.ep_counts.first(n)), std::span<int64_t>(counts));
  return exchange_from_counts(rows_of, counts);
}

namespace {

std::vector<int64_t> times(const std::vector<int64_t>& rows, int64_t width) {
  std::vector<int64_t> elements(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) elements[i] = rows[i] * width;
  return elements;
}

}  // namespace

void MoeTokenDispatcher::exchange_beside(ConstFloatView send, const std::vector<int64_t>& send_rows,
                                         FloatView receive, const std::vector<int64_t>& receive_rows,
                                         const std::function<void()>& beside) const {
  if (!beside) {
    group_->all_to_all(send, times(send_rows, hidden_), receive, times(receive_rows, hidden_));
    return;
  }
  dist::PendingCollective started =
      group_->start_all_to_all(send, times(send_rows, hidden_), receive, times(receive_rows, hidden_));
  beside();
  started.wait();
}

void MoeTokenDispatcher::to_experts(const ExpertExchange& x, ConstFloatView rows, const MoeActivations& saved,
                                    FloatView exchange, FloatView sorted, FloatView copies,
                                    const std::function<void()>& beside) const {
  const FloatView received = exchange.first(x.received * hidden_);
  ConstFloatView send = rows.first(x.rows * hidden_);
  if (replicas_ > 1) {
    backend_->gather_rows(send, x.rows, hidden_, saved.ep_replicate.first(x.sent), {}, copies.first(x.sent * hidden_));
    send = copies.first(x.sent * hidden_);
  }
  exchange_beside(send, x.send_rows, received, x.recv_rows, beside);
  backend_->gather_rows(received, x.received, hidden_, saved.ep_sort.first(x.received), {},
                        sorted.first(x.received * hidden_));
}

void MoeTokenDispatcher::from_experts(const ExpertExchange& x, ConstFloatView sorted, const MoeActivations& saved,
                                      FloatView exchange, FloatView rows, FloatView copies,
                                      const std::function<void()>& beside) const {
  const FloatView back = exchange.first(x.received * hidden_);
  backend_->gather_rows(sorted.first(x.received * hidden_), x.received, hidden_, saved.ep_unsort.first(x.received), {},
                        back);
  if (replicas_ == 1) {
    exchange_beside(back, x.recv_rows, rows.first(x.rows * hidden_), x.send_rows, beside);
    return;
  }
  // The slices' partial sums of each row (Megatron's reduce-scatter over the expert-tensor ranks).
  const FloatView partial = copies.first(x.sent * hidden_);
  exchange_beside(back, x.recv_rows, partial, x.send_rows, beside);
  backend_->gather_sum_rows(partial, x.sent, hidden_, saved.ep_combine.first(x.rows * replicas_), replicas_, {},
                            rows.first(x.rows * hidden_));
}

std::vector<int64_t> MoeTokenDispatcher::expert_rows(const MoeActivations& saved) const {
  const int64_t count = gathers_tokens() ? local_experts() : moe_.num_experts;
  const auto written = rows_written_.find(saved.expert_rows.data());
  if (written != rows_written_.end() && static_cast<int64_t>(written->second.size()) == count) return written->second;
  std::vector<int64_t> rows(static_cast<std::size_t>(count));
  backend_->copy_to_host(DeviceSpan<const int64_t>(saved.expert_rows.first(count)), std::span<int64_t>(rows));
  return rows;
}

}  // namespace mgt
