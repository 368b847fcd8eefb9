// Megatron-Core's MoELayer (megatron/core/transformer/moe/moe_layer.py) in place of a layer's MLP:
// route (moe_router.hpp), permute the tokens to the experts (moe_token_dispatcher.hpp), run the
// experts (moe_experts.hpp), combine their outputs weighted by the routing probabilities, and
// add the shared experts' output. Under expert parallelism each rank holds its share of the
// experts and the tokens travel to them and back by all-to-all (moe_token_dispatcher.hpp).
//
// Under tensor parallelism the experts' weights are split over the tensor-parallel ranks as
// Megatron-Core splits them with its default --expert-tensor-parallel-size (the tensor-parallel
// size): linear_fc1 by output features, linear_fc2 by input features, the shared experts as a
// dense MLP. Every tensor-parallel rank routes the whole sequence's tokens (under sequence
// parallelism it all-gathers them first, Megatron's gather_from_sequence_parallel_region around
// the experts in token_dispatcher.py), runs its slices of the experts on all of them and
// combines its partial outputs, whose sum over the group it reduce-scatters back to its part
// of the sequence (all-reduces without sequence parallelism). The routing is the same on every
// tensor-parallel rank, so the auxiliary losses are those of the whole sequence, as Megatron's
// router makes them by summing tokens_per_expert over the tensor-parallel group. In the
// backward the routing probabilities' gradient, partial on each rank, is summed over the group,
// and the router's input gradient (the same on every rank) joins the experts' partial one on
// tensor-parallel rank 0 only, before the reduction.
// With --expert-tensor-parallel-size 1 each rank runs its own part of the sequence through whole
// experts, as Megatron's ranks do. With one expert-parallel rank it holds every expert, and their
// gradients, each of a part of the sequence, are summed over the group as sequence-parallel
// gradients are (parameter_table.hpp). With expert parallelism the expert-parallel group is laid
// out in Megatron's expert grid (expert-tensor size 1, dist/parallel_layout.hpp), across the
// tensor-parallel ranks: each rank's own tokens travel to the experts' ranks by all-to-all (or
// all-gather) over it as without tensor parallelism (MoEAlltoAllTokenDispatcher and
// MoEAllGatherTokenDispatcher with an expert tensor-parallel size of 1 gather nothing over the
// tensor-parallel group), and each expert's gradient is reduced over its expert-data-parallel
// group.
// With any other --expert-tensor-parallel-size (Megatron's expert grid, dist/parallel_layout.hpp)
// each rank's own tokens travel the same way over the expert tensor-and-model-parallel group, to
// every expert-tensor-parallel rank of their experts' expert-parallel rank, each holding a slice
// of those experts' weights (linear_fc1 by output features, linear_fc2 by input features) and
// returning its partial outputs, summed per row (moe_token_dispatcher.hpp); without tensor
// parallelism a rank's own tokens are all its tokens.
// With --moe-shared-expert-gate the shared experts' output is scaled per token by
// sigmoid(x·w_gate), as Megatron-Core's SharedExpertMLP does with its gate (shared_experts.py).
// The gate's weight is replicated over the tensor-parallel ranks, each of which computes the gate
// on the whole sequence's tokens, as the router does.
// With --moe-shared-expert-overlap and the all-to-all dispatcher under expert parallelism, the
// shared experts' forward runs while the tokens travel to the experts' ranks, and (without the
// gate, whose backward shares the router's scratch) their backward while the output gradients
// travel there, as Megatron's SharedExpertMLP overlaps them with the dispatch: the exchange is
// started on the communicator (Communicator::start_all_to_all; on NCCL beside the compute) and
// waited for after them. The results are the same as without.
// With --delay-wgrad-compute (expert parallelism, all-to-all, grouped experts) the experts'
// backward computes their input gradients first and their weight gradients while those travel
// back to the tokens' ranks, which is what Megatron's flag delays the weight gradients for; the
// results are the same as without.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "kernels/backend.hpp"
#include "model/forward_context.hpp"
#include "model/gpt_parameters.hpp"
#include "model/moe_buffers.hpp"
#include "model/moe_experts.hpp"
#include "model/moe_router.hpp"
#include "model/moe_token_dispatcher.hpp"
#include "model/tensor_parallel_mappings.hpp"

namespace mgt {

class MoeLayer {
public:
  // `expert_group` (may be null): the expert-model-parallel group, or with experts split over
  // expert-tensor-parallel ranks of their own (ExpertParallelRank::tensor_size) the expert
  // tensor-and-model-parallel group; `tp` (may be null: no tensor parallelism) the model's
  // tensor-parallel mappings. Both must outlive the layer. With `fp8` (which must outlive the
  // layer) the experts and the shared experts compute in FP8; the router and the shared experts'
  // gate stay in the model's precision, as Megatron keeps them out of Transformer Engine's FP8
  // (router.py's gating linear is a plain GEMM).
  MoeLayer(GptParameters& params, int64_t layer, dist::Communicator* expert_group = nullptr,
           const TensorParallelMappings* tp = nullptr, Fp8Training* fp8 = nullptr);

  // output [T, h] from input [T, h] (the pre-MLP norm's output). Under sequence parallelism
  // input is the whole sequence's buffer holding this rank's rows (ctx.own_rows), all-gathered
  // in place and kept so for the backward, and output this rank's [ctx.local_tokens(), h].
  void forward(const ForwardContext& ctx, FloatView input, const MoeActivations& saved,
               const MoeScratch& scratch, FloatView output) const;
  // d_input [T, h] overwritten; the parameters' gradients added. Under sequence parallelism
  // d_output and d_input are this rank's [ctx.local_tokens(), h], input the gathered whole.
  void backward(const ForwardContext& ctx, ConstFloatView input, const MoeActivations& saved,
                const MoeScratch& scratch, ConstFloatView d_output, FloatView d_input) const;

private:
  struct TokenRange {
    int64_t first = 0;
    int64_t count = 0;
  };
  // With whole experts on every tensor-parallel rank: the tokens this rank runs through them, its
  // part of the sequence (all of them on rank 0 without sequence parallelism).
  TokenRange own_tokens(const ForwardContext& ctx) const;
  // From the routing in saved: output [T, h] = the experts' outputs weighted and summed per token
  // (partial sums under tensor parallelism), the tokens dispatched as the dispatcher does it.
  // `beside` (where overlaps_shared_experts(); empty otherwise): work run while the tokens travel
  // to the experts' ranks, once.
  void route_through_experts(const ForwardContext& ctx, ConstFloatView input, const MoeActivations& saved,
                             const MoeScratch& scratch, FloatView output,
                             const std::function<void()>& beside = {}) const;
  // The tokens of `part` of input [T, h] through the experts into the same rows of output, each
  // expert's rows padded to `capacity` (< 0: not padded): locally, or over the expert-parallel
  // group by all-to-all or all-gather.
  void run_experts(TokenRange part, ConstFloatView input, const MoeActivations& saved, const MoeScratch& scratch,
                   int64_t capacity, FloatView output, const std::function<void()>& beside = {}) const;
  // Their backward: scratch.d_probs [T, E] and d_input [T, h] (overwritten) from d_output [T, h];
  // the experts' gradients added. `beside` as in route_through_experts, while the output
  // gradients travel.
  // --moe-apply-probs-on-input: from d_routed, the gradient of the experts' weighted input rows
  // gathered back to the tokens, the gradients of the input (d_input) and of the probabilities
  // (scratch.d_probs).
  void probs_on_input_backward(int64_t tokens, ConstFloatView input, const MoeActivations& saved,
                               const MoeScratch& scratch, ConstFloatView d_routed, FloatView d_input) const;
  void route_through_experts_backward(const ForwardContext& ctx, ConstFloatView d_output, const MoeActivations& saved,
                                      const MoeScratch& scratch, FloatView d_input,
                                      const std::function<void()>& beside = {}) const;
  // Of run_experts: the rows of `part` of d_probs [T, E] and d_input [T, h] (overwritten).
  void run_experts_backward(TokenRange part, ConstFloatView d_output, const MoeActivations& saved,
                            const MoeScratch& scratch, FloatView d_probs, FloatView d_input,
                            const std::function<void()>& beside = {}) const;
  // Whether the shared experts run beside the token exchange (--moe-shared-expert-overlap): with
  // expert parallelism, the all-to-all dispatcher and every tensor-parallel rank running all the
  // tokens.
  bool overlaps_shared_experts() const;
  // The shared experts' output [T, h] (partial sums under tensor parallelism), gated with
  // --moe-shared-expert-gate, in scratch.shared_output: what forward adds to the experts'.
  ConstFloatView shared_experts_forward(int64_t tokens, ConstFloatView input, const MoeActivations& saved,
                                        const MoeScratch& scratch) const;
  // Its backward from d_output [T, h]: the shared experts' and the gate's gradients added, their
  // input gradient added to d_input (the gate's on tensor-parallel rank 0 only).
  void add_shared_experts_backward(int64_t tokens, ConstFloatView input, const MoeActivations& saved,
                                   const MoeScratch& scratch, ConstFloatView d_output, FloatView d_input) const;
  // The shared experts' MLP backward from the gradient dy [T, h] of its (ungated) output: its
  // weights' gradients added, its input gradient into dx [T, h].
  void shared_experts_backward(int64_t tokens, ConstFloatView input, const MoeActivations& saved,
                               const MoeScratch& scratch, ConstFloatView dy, FloatView dx) const;
  // The gate's sigmoid as the routing of the tokens to one expert, top-1, by the sigmoid score
  // function (Megatron's topk_routing_with_score_function: no normalisation with top-1).
  static MoeRoutingParams gate_routing(int64_t tokens);

  Backend* backend_;
  int64_t hidden_;
  int64_t num_experts_;
  MoeConfig moe_;
  MoeRouter router_;
  MoeTokenDispatcher dispatcher_;
  MoeExperts experts_;
  std::optional<ExpertMlp> shared_;
  std::optional<LinearLayer> shared_gate_;  // --moe-shared-expert-gate: w_gate [1, h]
  const TensorParallelMappings* tp_ = nullptr;  // null without tensor parallelism
  // Under tensor parallelism, each rank runs its own tokens through the experts:
  // --expert-tensor-parallel-size other than the tensor-parallel size.
  bool own_tokens_only_ = false;
};

}  // namespace mgt
