#include "model/moe_layer.hpp"

#include <algorithm>
#include <numeric>

#include "core/error.hpp"

namespace mgt {

MoeLayer::MoeLayer(GptParameters& params, int64_t layer, dist::Communicator* expert_group,
                   const TensorParallelMappings* tp, Fp8Training* fp8)
    : backend_(&params.backend()),
      hidden_(params.config().hidden_size),
      num_experts_(params.config().moe.num_experts),
      moe_(params.config().moe),
      router_(params, layer, layer_prefix(layer) + ".mlp"),
      dispatcher_(params.backend(), params.config().moe, params.config().hidden_size, expert_group,
                  std::max<int64_t>(1, params.expert_parallel().tensor_size), moe_expert_row_multiple(params.config())),
      experts_(params, layer_prefix(layer) + ".mlp", fp8) {
  // The dispatch group: the expert-parallel ranks, times the expert-tensor-parallel ranks when
  // the experts are split over ranks of their own.
  const int64_t ranks = params.expert_parallel().size * std::max<int64_t>(1, params.expert_parallel().tensor_size);
  if (dispatcher_.expert_parallel() != (ranks > 1) || (expert_group && expert_group->size() != ranks))
    throw Error("internal error: the parameters are for " + std::to_string(ranks) +
                " expert-parallel and expert-tensor-parallel ranks, the MoE layer runs on a group of " +
                std::to_string(expert_group ? expert_group->size() : 1));
  if (params.config().moe.shared_expert_intermediate_size > 0)
    shared_.emplace(params, layer_prefix(layer) + ".mlp.shared_experts", fp8);
  if (shared_ && params.config().moe.shared_expert_gate)
    shared_gate_.emplace(params, layer_prefix(layer) + ".mlp.shared_experts.gate_weight",
                         layer_prefix(layer) + ".mlp.shared_experts.gate_bias");  // no bias: none exists
  if (tp && tp->active()) {
    if (tp->size() != params.tensor_parallel().size)
      throw Error("internal error: the parameters are for " + std::to_string(params.tensor_parallel().size) +
                  " tensor-parallel ranks, the MoE layer runs on a group of " + std::to_string(tp->size()));
    tp_ = tp;
    own_tokens_only_ = moe_.experts_whole(tp->size()) || params.expert_parallel().tensor_size > 0;
  }
}

MoeLayer::TokenRange MoeLayer::own_tokens(const ForwardContext& ctx) const {
  if (ctx.sequence_parallel()) return {ctx.sequence_shard * ctx.local_tokens(), ctx.local_tokens()};
  return {0, tp_->rank() == 0 ? ctx.tokens() : 0};
}

bool MoeLayer::overlaps_shared_experts() const {
  return moe_.shared_expert_overlap && shared_ && dispatcher_.expert_parallel() && !dispatcher_.gathers_tokens() &&
         !own_tokens_only_;
}

void MoeLayer::route_through_experts(const ForwardContext& ctx, ConstFloatView input, const MoeActivations& saved,
                                     const MoeScratch& scratch, FloatView output,
                                     const std::function<void()>& beside) const {
  const int64_t tokens = ctx.tokens();
  if (own_tokens_only_) {
    // --expert-tensor-parallel-size 1 (or any other size than the tensor-parallel one): each
    // rank runs its own tokens through the experts (with their own capacity), as Megatron's
    // ranks do; the other rows stay zero in the sum.
    // Without sequence parallelism rank 0 alone runs the tokens, which an all-gather over an
    // expert-parallel group across the tensor-parallel ranks cannot take (training refuses MoE
    // under tensor parallelism without it, train/moe_options_validate.cpp).
    if (dispatcher_.expert_parallel() && !ctx.sequence_parallel())
      throw Error("internal error: whole experts spread over the tensor-parallel ranks without sequence parallelism");
    const TokenRange own = own_tokens(ctx);
    backend_->fill(output.first(tokens * hidden_), 0.0f);
    run_experts(own, input, saved, scratch, moe_.pad_to_capacity ? moe_capacity(moe_, own.count) : -1, output);
    return;
  }
  // --moe-pad-expert-input-to-capacity: each expert's rows padded to its capacities of the
  // sequence-parallel ranks' tokens (routed rank by rank, moe_router.hpp).
  run_experts({0, tokens}, input, saved, scratch,
              moe_.pad_to_capacity ? moe_row_capacity(moe_, tokens, ctx.sequence_shards) : -1, output, beside);
}

void MoeLayer::run_experts(TokenRange part, ConstFloatView input, const MoeActivations& saved,
                           const MoeScratch& scratch, int64_t capacity, FloatView output,
                           const std::function<void()>& beside) const {
  const int64_t e = num_experts_;
  const int64_t n = part.count;
  const ConstFloatView x = input.subspan(part.first * hidden_, n * hidden_);
  const ConstFloatView map = saved.routing_map.subspan(part.first * e, n * e);
  const ConstFloatView probs = saved.probs.subspan(part.first * e, n * e);
  const FloatView y = output.subspan(part.first * hidden_, n * hidden_);
  if (dispatcher_.gathers_tokens()) {
    // MoEAllGatherTokenDispatcher: the group's tokens, probabilities and routing maps gathered
    // (each rank's capacity padding with them), this rank's experts run on theirs, the outputs
    // summed back over the group.
    dist::Communicator& group = dispatcher_.group();
    const int64_t gathered = n * group.size();
    const FloatView all_tokens = scratch.ag_tokens.first(gathered * hidden_);
    const FloatView all_probs = scratch.ag_probs.first(gathered * e);
    const FloatView all_map = scratch.ag_map.first(gathered * e);
    group.all_gather(x, all_tokens);
    group.all_gather(probs, all_probs);
    group.all_gather(map, all_map);
    const std::vector<int64_t> rows_of = dispatcher_.dispatch_local(all_tokens, gathered, all_map, all_probs,
                                                                    capacity < 0 ? -1 : capacity * group.size(), saved);
    const int64_t rows = std::accumulate(rows_of.begin(), rows_of.end(), int64_t{0});
    experts_.forward(rows_of, saved.permuted, saved, saved.expert_output);
    dispatcher_.combine(gathered, rows, saved, all_tokens);
    group.reduce_scatter(all_tokens, y, dist::ReduceOp::Sum);
    return;
  }
  const std::vector<int64_t> rows_of = dispatcher_.dispatch(x, n, map, probs, capacity, saved);
  const int64_t rows = std::accumulate(rows_of.begin(), rows_of.end(), int64_t{0});
  if (dispatcher_.expert_parallel()) {
    const ExpertExchange xchg = dispatcher_.plan_exchange(rows_of, saved);
    dispatcher_.to_experts(xchg, saved.permuted, saved, scratch.ep_exchange, saved.expert_input, scratch.ep_copies,
                           beside);
    experts_.forward(xchg.expert_rows, saved.expert_input, saved, scratch.ep_sorted);
    dispatcher_.from_experts(xchg, scratch.ep_sorted, saved, scratch.ep_exchange, saved.expert_output,
                             scratch.ep_copies);
  } else {
    experts_.forward(rows_of, saved.permuted, saved, saved.expert_output);
  }
  dispatcher_.combine(n, rows, saved, y);
}

void MoeLayer::route_through_experts_backward(const ForwardContext& ctx, ConstFloatView d_output,
                                              const MoeActivations& saved, const MoeScratch& scratch,
                                              FloatView d_input, const std::function<void()>& beside) const {
  const int64_t tokens = ctx.tokens();
  const FloatView d_probs = scratch.d_probs.first(tokens * num_experts_);
  if (!own_tokens_only_) {
    run_experts_backward({0, tokens}, d_output, saved, scratch, d_probs, d_input, beside);
    return;
  }
  backend_->fill(d_probs, 0.0f);
  backend_->fill(d_input.first(tokens * hidden_), 0.0f);
  run_experts_backward(own_tokens(ctx), d_output, saved, scratch, d_probs, d_input);
}

void MoeLayer::run_experts_backward(TokenRange part, ConstFloatView d_output, const MoeActivations& saved,
                                    const MoeScratch& scratch, FloatView d_probs, FloatView d_input,
                                    const std::function<void()>& beside) const {
  const int64_t e = num_experts_;
  const int64_t n = part.count;
  const std::vector<int64_t> rows_of = dispatcher_.expert_rows(saved);
  const int64_t rows = std::accumulate(rows_of.begin(), rows_of.end(), int64_t{0});
  const ConstFloatView dy = d_output.subspan(part.first * hidden_, n * hidden_);
  const FloatView dp = d_probs.subspan(part.first * e, n * e);
  const FloatView dx = d_input.subspan(part.first * hidden_, n * hidden_);
  if (dispatcher_.gathers_tokens()) {
    // The reduce-scatter's backward gathers the output gradient; the gathers' backward
    // reduce-scatter the gradients of the tokens and of the probabilities (each rank's experts'
    // columns of the gathered ones).
    dist::Communicator& group = dispatcher_.group();
    const int64_t gathered = n * group.size();
    const FloatView all_tokens = scratch.ag_tokens.first(gathered * hidden_);
    const FloatView all_d_probs = scratch.ag_probs.first(gathered * e);
    group.all_gather(dy, all_tokens);
    dispatcher_.combine_backward(all_tokens, gathered, rows, saved, scratch, all_d_probs);
    group.reduce_scatter(all_d_probs, dp, dist::ReduceOp::Sum);
    experts_.backward(rows_of, scratch.d_rows, saved.permuted, saved, scratch, scratch.d_permuted);
    dispatcher_.dispatch_backward(scratch.d_permuted.first(rows * hidden_), gathered, rows, saved, all_tokens);
    group.reduce_scatter(all_tokens, dx, dist::ReduceOp::Sum);
    return;
  }
  dispatcher_.combine_backward(dy, n, rows, saved, scratch, dp);
  if (dispatcher_.expert_parallel()) {
    // The forward's path reversed: ∂/∂expert_output to the experts, ∂/∂input of theirs back.
    const ExpertExchange xchg = dispatcher_.saved_exchange(rows_of, saved);
    dispatcher_.to_experts(xchg, scratch.d_rows, saved, scratch.ep_exchange, scratch.ep_sorted, scratch.ep_copies,
                           beside);
    // --delay-wgrad-compute: the experts' weight gradients while their input gradients travel.
    std::function<void()> weights;
    experts_.backward(xchg.expert_rows, scratch.ep_sorted, saved.expert_input, saved, scratch, scratch.ep_d_input,
                      moe_.delay_wgrad_compute ? &weights : nullptr);
    dispatcher_.from_experts(xchg, scratch.ep_d_input, saved, scratch.ep_exchange, scratch.d_permuted,
                             scratch.ep_copies, weights);
  } else {
    experts_.backward(rows_of, scratch.d_rows, saved.permuted, saved, scratch, scratch.d_permuted);
  }
  dispatcher_.dispatch_backward(scratch.d_permuted.first(rows * hidden_), n, rows, saved, dx);
}

void MoeLayer::probs_on_input_backward(int64_t tokens, ConstFloatView input, const MoeActivations& saved,
                                       const MoeScratch& scratch, ConstFloatView d_routed, FloatView d_input) const {
  // One expert per token (top-1): token t's expert read p_t · x_t, and d_routed[t] is the gradient
  // of that row (zero for a dropped token, whose p_t is 0 too). Then ∂/∂p_t = x_t · d_routed[t],
  // in its expert's column of d_probs, and ∂/∂x_t = p_t · d_routed[t]. Under tensor parallelism
  // both are the rank's partial sums, reduced with the others after this.
  const int64_t e = num_experts_;
  const ConstFloatView map = saved.routing_map.first(tokens * e);
  DeviceBuffer p(*backend_, tokens), d_p(*backend_, tokens);
  backend_->row_dot(saved.probs.first(tokens * e), map, tokens, e, p.view());
  backend_->row_dot(input.first(tokens * hidden_), d_routed, tokens, hidden_, d_p.view());
  backend_->scale_rows(map, d_p.view(), tokens, e, scratch.d_probs.first(tokens * e));
  backend_->scale_rows(d_routed, p.view(), tokens, hidden_, d_input.first(tokens * hidden_));
}

MoeRoutingParams MoeLayer::gate_routing(int64_t tokens) {
  MoeRoutingParams p;
  p.tokens = tokens;
  p.experts = 1;
  p.topk = 1;
  p.sigmoid = true;
  return p;
}

ConstFloatView MoeLayer::shared_experts_forward(int64_t tokens, ConstFloatView input, const MoeActivations& saved,
                                               const MoeScratch& scratch) const {
  const FloatView gated = scratch.shared_output.first(tokens * hidden_);
  const FloatView y = shared_gate_ ? saved.shared_ungated.first(tokens * hidden_) : gated;
  // Under tensor parallelism each rank holds its slice of the shared experts' hidden units.
  shared_->forward(input, tokens, saved.shared_fc1_output.first(tokens * shared_->fc1_size()),
                   saved.shared_activation_output.first(tokens * shared_->ffn()), y);
  if (shared_gate_) {
    // SharedExpertMLP.forward: output * sigmoid(linear(hidden_states, gate_weight)), the logits
    // in fp32 as the router's. A rank's slice's partial sum scaled is its part of the scaled sum.
    const MoeRoutingParams p = gate_routing(tokens);
    shared_gate_->forward(input, tokens, saved.shared_gate_logits.first(tokens));
    DeviceArray<double> unused(*backend_, 2);  // no auxiliary loss or z-loss to count
    backend_->moe_route(saved.shared_gate_logits.first(tokens), p, scratch.gates.first(tokens),
                        saved.shared_gate.first(tokens), saved.shared_gate_map.first(tokens), FloatView(),
                        unused.view(), /*accumulate=*/false);
    backend_->scale_rows(y, saved.shared_gate.first(tokens), tokens, hidden_, gated);
  }
  return gated;
}

void MoeLayer::shared_experts_backward(int64_t tokens, ConstFloatView input, const MoeActivations& saved,
                                       const MoeScratch& scratch, ConstFloatView dy, FloatView dx) const {
  shared_->backward(dy, input, tokens, saved.shared_fc1_output.first(tokens * shared_->fc1_size()),
                    saved.shared_activation_output.first(tokens * shared_->ffn()),
                    scratch.d_activation.first(tokens * shared_->ffn()),
                    scratch.d_fc1.first(tokens * shared_->fc1_size()), dx);
}

void MoeLayer::add_shared_experts_backward(int64_t tokens, ConstFloatView input, const MoeActivations& saved,
                                           const MoeScratch& scratch, ConstFloatView d_output,
                                           FloatView d_input) const {
  const FloatView dx = scratch.d_hidden.first(tokens * hidden_);
  ConstFloatView dy = d_output.first(tokens * hidden_);
  if (shared_gate_) {
    // ∂/∂gate_t = d_output_t · y_t, y the shared experts' whole output: each rank's slice's dot
    // summed over the tensor-parallel group. The router's backward is done with d_probs and
    // d_logits: their first T entries serve the gate's one column.
    const FloatView d_gate = scratch.d_probs.first(tokens);
    const FloatView d_logits = scratch.d_logits.first(tokens);
    backend_->row_dot(dy, saved.shared_ungated.first(tokens * hidden_), tokens, hidden_, d_gate);
    if (tp_) tp_->all_reduce(d_gate, dist::ReduceOp::Sum);
    const MoeRoutingParams p = gate_routing(tokens);
    backend_->moe_route_backward(saved.shared_gate_logits.first(tokens), p, d_gate,
                                 saved.shared_gate_map.first(tokens), ConstFloatView(), 0.0f, 0.0f, d_logits);
    // The GEMMs take operands of one type: under bf16 activations the fp32 logits' gradient is
    // rounded to theirs (as the router's backward does).
    ConstFloatView d_logits_typed = d_logits;
    DeviceBuffer rounded;
    if (d_logits.type() != input.type()) {
      rounded = DeviceBuffer(*backend_, tokens, input.type());
      backend_->convert(d_logits, rounded.view());
      d_logits_typed = rounded.view();
    }
    shared_gate_->backward(d_logits_typed, input.first(tokens * hidden_), tokens, dx);
    // The same on every tensor-parallel rank: added once before the group's reduction.
    if (!tp_ || tp_->rank() == 0) backend_->accumulate(d_input.first(tokens * hidden_), dx);
    // ∂/∂y = gate ⊙ d_output.
    const FloatView scaled = scratch.shared_output.first(tokens * hidden_);
    backend_->scale_rows(dy, saved.shared_gate.first(tokens), tokens, hidden_, scaled);
    dy = scaled;
  }
  shared_experts_backward(tokens, input, saved, scratch, dy, dx);
  backend_->accumulate(d_input.first(tokens * hidden_), dx);
}

void MoeLayer::forward(const ForwardContext& ctx, FloatView whole_input, const MoeActivations& saved,
                       const MoeScratch& scratch, FloatView local_output) const {
  const int64_t tokens = ctx.tokens();
  const bool sequence_parallel = tp_ && ctx.sequence_parallel();
  const ConstFloatView input = whole_input.first(tokens * hidden_);
  if (sequence_parallel) tp_->all_gather(ctx.own_rows(input, hidden_), whole_input.first(tokens * hidden_));
  // The whole sequence's output; partial sums of the tensor-parallel ranks' expert slices under
  // tensor parallelism.
  const FloatView output = sequence_parallel ? scratch.sp_whole.first(tokens * hidden_) : local_output;
  router_.forward(ctx, input, saved, scratch);
  // Megatron's MoELayer returns output + shared_experts(hidden_states); the shared experts' part
  // is computed beside the dispatch where they overlap it.
  const bool overlap = overlaps_shared_experts();
  route_through_experts(ctx, input, saved, scratch, output,
                        overlap ? std::function<void()>([&] { shared_experts_forward(tokens, input, saved, scratch); })
                                : std::function<void()>());
  if (shared_) {
    const ConstFloatView shared =
        overlap ? ConstFloatView(scratch.shared_output.first(tokens * hidden_))
                : shared_experts_forward(tokens, input, saved, scratch);
    backend_->accumulate(output.first(tokens * hidden_), shared);
  }
  if (sequence_parallel)
    tp_->reduce_scatter_to_sequence_parallel_region_forward(output, local_output.first(ctx.local_tokens() * hidden_));
  else if (tp_)
    tp_->reduce_from_tensor_region_forward(output.first(tokens * hidden_));
}

void MoeLayer::backward(const ForwardContext& ctx, ConstFloatView whole_input, const MoeActivations& saved,
                        const MoeScratch& scratch, ConstFloatView local_d_output, FloatView local_d_input) const {
  const int64_t tokens = ctx.tokens();
  const bool sequence_parallel = tp_ && ctx.sequence_parallel();
  const ConstFloatView input = whole_input.first(tokens * hidden_);
  ConstFloatView d_output = local_d_output;
  FloatView d_input = local_d_input;
  if (sequence_parallel) {
    // The reduce-scatter's backward: every rank's output gradient, gathered.
    const FloatView whole = scratch.sp_d_output.first(tokens * hidden_);
    tp_->all_gather(local_d_output.first(ctx.local_tokens() * hidden_), whole);
    d_output = whole;
    d_input = scratch.sp_whole.first(tokens * hidden_);
  }
  // Beside the output gradients' exchange: the shared experts' backward, their input gradient in
  // scratch.shared_output (free in a backward without the gate, whose backward shares the
  // router's scratch and runs after it), added where add_shared_experts_backward adds it.
  const bool overlap = overlaps_shared_experts() && !shared_gate_;
  const FloatView shared_dx = overlap ? scratch.shared_output.first(tokens * hidden_) : FloatView();
  // --moe-apply-probs-on-input: the dispatch returns the gradient of the weighted input rows,
  // which probs_on_input_backward turns into the input's and the probabilities'.
  const FloatView d_routed = moe_.apply_probs_on_input ? scratch.d_hidden.first(tokens * hidden_) : d_input;
  route_through_experts_backward(ctx, d_output, saved, scratch, d_routed,
                                 overlap ? std::function<void()>([&] {
                                   shared_experts_backward(tokens, input, saved, scratch,
                                                           d_output.first(tokens * hidden_), shared_dx);
                                 })
                                         : std::function<void()>());
  if (moe_.apply_probs_on_input) probs_on_input_backward(tokens, input, saved, scratch, d_routed, d_input);
  // Each rank's expert outputs are its slices' partial sums, and so is its gradient of the
  // probabilities that weight them.
  if (tp_) tp_->all_reduce(scratch.d_probs.first(tokens * num_experts_), dist::ReduceOp::Sum);
  // The router's input gradient is the same on every tensor-parallel rank: added once.
  router_.backward(ctx, input, saved, scratch, !tp_ || tp_->rank() == 0 ? d_input : FloatView());
  if (overlap) {
    backend_->accumulate(d_input.first(tokens * hidden_), shared_dx);
  } else if (shared_) {
    add_shared_experts_backward(tokens, input, saved, scratch, d_output, d_input);
  }
  if (sequence_parallel)
    tp_->reduce_scatter_to_sequence_parallel_region_forward(d_input, local_d_input.first(ctx.local_tokens() * hidden_));
  else if (tp_)
    tp_->reduce_from_tensor_region_forward(d_input.first(tokens * hidden_));
}

}  // namespace mgt
