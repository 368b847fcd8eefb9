// The token permutation around the experts, as Megatron-Core's MoEAlltoAllTokenDispatcher does it
// (megatron/core/transformer/moe/token_dispatcher.py, permute/unpermute and sort_chunks_by_idxs
// in moe_utils.py): each expert's tokens in token order, expert after expert; the experts'
// outputs weighted by the routing probabilities and summed back per token.
//
// Under expert parallelism (--expert-model-parallel-size) every rank routes its own tokens over
// all experts and permutes them as above; the rows of each rank's experts then go to that rank
// in one all-to-all over the expert-model-parallel group (its input_splits and output_splits),
// arrive grouped by source rank and are sorted by local expert (sort_chunks_by_idxs), run
// through the local experts, and come back by the reverse sort and all-to-all. The backward
// moves the gradients along the same path in the same order.
//
// With --moe-token-dispatcher-type allgather under expert parallelism the tokens travel as
// Megatron-Core's MoEAllGatherTokenDispatcher moves them instead: every rank all-gathers the
// expert-parallel group's tokens, routing probabilities and routing maps, permutes the gathered
// tokens routed to its own experts (dispatch_local), runs them, combines their outputs into the
// gathered tokens' places and reduce-scatters the sum back to the ranks that hold the tokens
// (model/moe_layer.cpp). The backward all-gathers the output gradient and reduce-scatters the
// input's and the probabilities' gradients.
//
// With --expert-tensor-parallel-size other than 1 and the tensor-parallel size the group is
// Megatron's expert tensor-and-model-parallel group (tp_ep_group in token_dispatcher.py): its
// expert-tensor-parallel ranks of one expert-parallel rank each hold a slice of that rank's
// experts (`replicas` of them, group rank = expert-tensor rank + replicas · expert-parallel rank).
// MoEAlltoAllTokenDispatcher sends each rank's rows to the experts' ranks by all-to-all over the
// expert-parallel group, then all-gathers them over the expert-tensor-parallel group, and its
// combine reduce-scatters the slices' partial outputs back before the reverse all-to-all; here
// the two steps are one all-to-all over the tensor-and-model group that sends each row to every
// slice of its expert, and the partial outputs that come back are summed per row (the same rows
// reach the same slices; the sum runs in a fixed order). The allgather dispatcher gathers over
// the whole tensor-and-model group, as Megatron's MoEAllGatherTokenDispatcher does, and its
// reduce-scatter adds the slices' partial outputs.
//
// The rows per expert decide the shapes of the experts' GEMMs, so they are read back to the host
// once per layer and micro-batch (Megatron reads tokens_per_expert back the same way); the
// backend builds the index tables from the routing map where it lies (moe_permutation) and moves
// the rows (gather_rows, gather_sum_rows), summing each token's rows in a fixed order.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <vector>

#include "dist/communicator.hpp"
#include "kernels/backend.hpp"
#include "model/moe_buffers.hpp"

namespace mgt {

// One MoE layer's exchange of rows between the expert-parallel ranks for one micro-batch.
struct ExpertExchange {
  std::vector<int64_t> send_rows;    // [ep] this rank's rows for each rank's experts (input_splits)
  std::vector<int64_t> recv_rows;    // [ep] rows from each rank (output_splits)
  std::vector<int64_t> expert_rows;  // [local experts] rows of each local expert, every rank's
  int64_t rows = 0;                  // this rank's permuted rows
  int64_t sent = 0;                  // Σ send_rows: rows · the replicas of each row
  int64_t received = 0;              // Σ recv_rows: the local experts' rows
};

class MoeTokenDispatcher {
public:
  // `expert_group` (may be null: every expert here) must outlive the dispatcher; `replicas`: the
  // expert-tensor-parallel ranks in it that share each expert-parallel rank's experts (1: the
  // expert-model-parallel group). Each expert's rows (after any capacity padding) are padded with
  // zero rows to a multiple of `row_multiple` (moe_expert_row_multiple): under the all-to-all each
  // rank's rows for each expert, so that every expert's rows, however many ranks sent them, are a
  // multiple too.
  MoeTokenDispatcher(Backend& backend, const MoeConfig& moe, int64_t hidden,
                     dist::Communicator* expert_group = nullptr, int64_t replicas = 1, int64_t row_multiple = 1);

  // Whether the experts are spread over two or more ranks.
  bool expert_parallel() const { return group_ != nullptr; }
  // Whether they exchange tokens by all-gather and reduce-scatter (the allgather dispatcher with
  // expert parallelism) rather than all-to-all.
  bool gathers_tokens() const { return group_ != nullptr && moe_.dispatcher == MoeDispatcher::kAllgather; }
  // The experts of this rank: [first_local_expert(), + local_experts()).
  int64_t local_experts() const { return group_ ? moe_.num_experts / expert_ranks() : moe_.num_experts; }
  int64_t first_local_expert() const { return group_ ? group_->rank() / replicas_ * local_experts() : 0; }
  // The ranks of the group that hold different experts (its expert-parallel size).
  int64_t expert_ranks() const { return group_ ? group_->size() / replicas_ : 1; }
  dist::Communicator& group() const { return *group_; }

  // From saved.routing_map and probs: the index tables, saved.row_weights and saved.permuted
  // (input [T, h] by expert; each row times its weight under --moe-apply-probs-on-input). Returns the rows of each expert, each padded to `capacity` rows
  // (< 0: not padded; --moe-pad-expert-input-to-capacity).
  std::vector<int64_t> dispatch(ConstFloatView input, int64_t tokens, int64_t capacity,
                                const MoeActivations& saved) const;
  // The same from routing_map and probs [tokens, E] given (a part of the routed tokens).
  std::vector<int64_t> dispatch(ConstFloatView input, int64_t tokens, ConstFloatView routing_map, ConstFloatView probs,
                                int64_t capacity, const MoeActivations& saved) const;
  // The allgather dispatcher's permutation of the gathered tokens: from routing_map and probs
  // [tokens, E] (every rank's, gathered), the index tables, saved.row_weights and saved.permuted
  // (input [tokens, h] by expert) of this rank's experts only. `capacity` pads each expert's rows
  // under --moe-pad-expert-input-to-capacity (< 0: no padding). Returns the rows of each local
  // expert.
  std::vector<int64_t> dispatch_local(ConstFloatView input, int64_t tokens, ConstFloatView routing_map,
                                      ConstFloatView probs, int64_t capacity, const MoeActivations& saved) const;
  // output [T, h] = Σ over each token's rows of row_weight · expert_output (of expert_output, the
  // weights applied to the input, under --moe-apply-probs-on-input).
  void combine(int64_t tokens, int64_t rows, const MoeActivations& saved, FloatView output) const;
  // From d_output [T, h]: scratch.d_rows (∂/∂expert_output) and d_probs [T, E] (∂/∂probs; zeros
  // under --moe-apply-probs-on-input, whose weights' gradient MoeLayer::backward computes).
  void combine_backward(ConstFloatView d_output, int64_t tokens, int64_t rows, const MoeActivations& saved,
                        const MoeScratch& scratch, FloatView d_probs) const;
  // d_input [T, h] = Σ over each token's rows of d_permuted.
  void dispatch_backward(ConstFloatView d_permuted, int64_t tokens, int64_t rows, const MoeActivations& saved,
                         FloatView d_input) const;
  // The rows of each expert as dispatch (or dispatch_local: of each local expert) left them in
  // saved.expert_rows (kept from the forward's read-back, not read again).
  std::vector<int64_t> expert_rows(const MoeActivations& saved) const;

  // ---- expert parallelism ----
  // Collective over the expert group (after dispatch): the rows each rank sends each local
  // expert, exchanged; saved.ep_counts, ep_sort and ep_unsort written.
  ExpertExchange plan_exchange(const std::vector<int64_t>& rows_of, const MoeActivations& saved) const;
  // The same exchange again in the backward, from saved.ep_counts.
  ExpertExchange saved_exchange(const std::vector<int64_t>& rows_of, const MoeActivations& saved) const;
  // Collective: `rows` [x.rows, h] (this rank's, by expert) to the experts' ranks; `sorted`
  // [x.received, h] receives them by local expert. `exchange` is scratch of the same size,
  // `copies` [x.sent, h] scratch for the rows as sent with replicas. `beside` (may be empty) runs
  // while the exchange is under way (--moe-shared-expert-overlap: Communicator::start_all_to_all);
  // it must write none of `rows`, `copies`, `exchange` and `sorted`.
  void to_experts(const ExpertExchange& x, ConstFloatView rows, const MoeActivations& saved, FloatView exchange,
                  FloatView sorted, FloatView copies = {}, const std::function<void()>& beside = {}) const;
  // Collective, the reverse: `sorted` [x.received, h] back to the ranks whose rows they are;
  // `rows` [x.rows, h] receives this rank's (with replicas, the sum of the slices' rows).
  // `beside` as to_experts' (--delay-wgrad-compute); it must write none of `rows`, `copies` and
  // `exchange`.
  void from_experts(const ExpertExchange& x, ConstFloatView sorted, const MoeActivations& saved, FloatView exchange,
                    FloatView rows, FloatView copies = {}, const std::function<void()>& beside = {}) const;

private:
  // dispatch over experts [first, first + count) of routing_map and probs [tokens, E], each
  // expert's rows padded to `capacity` (< 0: not padded).
  std::vector<int64_t> permute(ConstFloatView input, int64_t tokens, ConstFloatView routing_map, ConstFloatView probs,
                               int64_t first, int64_t count, int64_t capacity, const MoeActivations& saved) const;
  // The all-to-all of rows of `hidden_` elements (counts in rows), with `beside` (if any) run while
  // it is under way (Communicator::start_all_to_all).
  void exchange_beside(ConstFloatView send, const std::vector<int64_t>& send_rows, FloatView receive,
                       const std::vector<int64_t>& receive_rows, const std::function<void()>& beside) const;
  // The first `size` elements of staging_, grown to hold them.
  std::span<int64_t> staging(int64_t size) const;
  ExpertExchange exchange_from_counts(const std::vector<int64_t>& rows_of, const std::vector<int64_t>& counts) const;

  Backend* backend_;
  MoeConfig moe_;
  int64_t hidden_;
  dist::Communicator* group_ = nullptr;  // null without expert parallelism
  int64_t replicas_ = 1;
  int64_t row_multiple_ = 1;
  // Page-locked memory the rows per expert come back to (permute).
  mutable PinnedHostArray<int64_t> staging_;
  // The rows per expert permute last wrote to each expert_rows table (by its address): one per
  // micro-batch whose activations are kept.
  mutable std::map<const int64_t*, std::vector<int64_t>> rows_written_;
};

}  // namespace mgt
