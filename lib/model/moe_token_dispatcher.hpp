// The token permutation around the experts on one rank, as Megatron-Core's
// MoEAllGatherTokenDispatcher and MoEAlltoAllTokenDispatcher do it with one expert-parallel rank
// (megatron/core/transformer/moe/token_dispatcher.py, permute/unpermute in moe_utils.py): each
// expert's tokens in token order, expert after expert; the experts' outputs weighted by the
// routing probabilities and summed back per token.
//
// The rows per expert decide the shapes of the experts' GEMMs, so the routing map is read back
// to the host once per layer and micro-batch (Megatron reads tokens_per_expert back the same
// way); the host builds the index tables and the backend moves the rows (gather_rows,
// gather_sum_rows), summing each token's rows in a fixed order.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/backend.hpp"
#include "model/moe_buffers.hpp"

namespace mgt {

class MoeTokenDispatcher {
public:
  MoeTokenDispatcher(Backend& backend, const MoeConfig& moe, int64_t hidden);

  // From saved.routing_map and probs: the index tables, saved.row_weights and saved.permuted
  // (input [T, h] by expert). Returns the rows of each expert (with padding to the capacity
  // under --moe-pad-expert-input-to-capacity).
  std::vector<int64_t> dispatch(ConstFloatView input, int64_t tokens, const MoeActivations& saved) const;
  // output [T, h] = Σ over each token's rows of row_weight · expert_output.
  void combine(int64_t tokens, int64_t rows, const MoeActivations& saved, FloatView output) const;
  // From d_output [T, h]: scratch.d_rows (∂/∂expert_output) and scratch.d_probs (∂/∂probs).
  void combine_backward(ConstFloatView d_output, int64_t tokens, int64_t rows, const MoeActivations& saved,
                        const MoeScratch& scratch) const;
  // d_input [T, h] = Σ over each token's rows of d_permuted.
  void dispatch_backward(ConstFloatView d_permuted, int64_t tokens, int64_t rows, const MoeActivations& saved,
                         FloatView d_input) const;
  // The rows of each expert as dispatch left them (read back from saved.expert_rows).
  std::vector<int64_t> expert_rows(const MoeActivations& saved) const;

private:
  Backend* backend_;
  MoeConfig moe_;
  int64_t hidden_;
};

}  // namespace mgt
