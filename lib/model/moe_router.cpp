#include "model/moe_router.hpp"

#include "model/context_parallel_attention.hpp"

namespace mgt {

namespace {

// The jitter's noise: the stream of the layer's MLP-output dropout under another Philox key (the
// seed with its bits mixed by a constant), so that it is independent of every dropout mask and,
// like them, a function of the seed, the micro-batch, the layer and the element's index in the
// whole [s, b, h] input: the same for every tensor-, data- and expert-parallel layout, and again
// in a recomputed forward.
DropoutKey jitter_key(const ForwardContext& ctx, int64_t layer) {
  DropoutKey key = ctx.key(layer, DropoutSite::kMlpOutput);
  key.seed ^= 0x9E3779B97F4A7C15ull;
  return key;
}

// --moe-router-force-load-balancing's logits: the stream of the layer's MLP-output dropout under
// yet another key, so that, like the jitter's noise, they are a function of the seed, the
// micro-batch and the layer, and the same again in a recomputed forward (Megatron's RandomSTE
// draws from a generator seeded by the global rank instead). Each context-parallel rank routes
// its own part of the sequences: its draws follow the other ranks'.
DropoutKey random_logits_key(const ForwardContext& ctx, int64_t layer, int64_t logits) {
  DropoutKey key = ctx.key(layer, DropoutSite::kMlpOutput);
  key.seed ^= 0xD1B54A32D192ED03ull;
  if (ctx.context_parallel) key.offset += static_cast<uint64_t>(ctx.context_parallel->group().rank() * logits);
  return key;
}

// The ranks the pass's sequences are split over by context parallelism (1 without it).
int64_t context_parallel_ranks(const ForwardContext& ctx) {
  return ctx.context_parallel ? ctx.context_parallel->size() : 1;
}

}  // namespace

MoeRouter::MoeRouter(GptParameters& params, int64_t layer, const std::string& prefix)
    : backend_(&params.backend()),
      layer_(layer),
      moe_(params.config().moe),
      gate_(params, prefix + ".router.weight", prefix + ".router.bias"),
      expert_bias_(&params.moe_expert_bias()) {}

MoeRoutingParams MoeRouter::routing(const ForwardContext& ctx) const {
  MoeRoutingParams p;
  p.tokens = ctx.tokens();
  p.experts = moe_.num_experts;
  p.topk = moe_.topk;
  p.sigmoid = moe_.score_function == MoeScoreFunction::kSigmoid;
  p.pre_softmax = moe_.pre_softmax;
  p.num_groups = moe_.group_topk > 0 ? moe_.num_groups : 0;
  p.group_topk = moe_.group_topk;
  p.scaling_factor = static_cast<float>(moe_.topk_scaling_factor);
  p.capacity = moe_capacity(moe_, p.tokens);
  p.drop_by_position = moe_.drop_policy == MoeDropPolicy::kPosition;
  p.expert_bias = expert_bias_->bias(layer_);
  // Megatron's apply_load_balancing_loss computes nothing for a zero coefficient.
  if (ctx.training && moe_.aux_loss_coeff != 0.0 && moe_.load_balancing != MoeLoadBalancing::kNone)
    p.aux_groups = moe_.load_balancing == MoeLoadBalancing::kSeqAuxLoss ? ctx.batch : 1;
  // Megatron's apply_load_balancing_loss passes the tensor x context-parallel group as the
  // losses' sequence_partition_group (megatron/core/transformer/moe/router.py): the tokens per
  // expert summed over it, normalised by its tokens. Under sequence parallelism this router
  // already routes the whole sequence of the tensor-parallel group, so only the context-parallel
  // ranks' parts remain to be counted together (forward).
  p.aux_partitions = context_parallel_ranks(ctx);
  p.z_loss = ctx.training && moe_.z_loss;
  if (moe_.load_balancing == MoeLoadBalancing::kSinkhorn) {
    // Megatron's sinkhorn_load_balancing: the gates are the sigmoid (top-1) or the softmax over
    // all experts (top-k), with no groups, scaling or expert bias (its auxiliary loss and
    // capacity are refused with the flags); forward chooses by the sinkhorn of the logits in
    // training, by those gates otherwise.
    p.sinkhorn = true;
    p.sigmoid = moe_.topk == 1;
    p.pre_softmax = moe_.topk > 1;
    p.num_groups = p.group_topk = 0;
    p.scaling_factor = 0.0f;
    p.expert_bias = nullptr;
  }
  return p;
}

ConstFloatView MoeRouter::gate_input(const ForwardContext& ctx, ConstFloatView input, DeviceBuffer& jittered) const {
  if (!jitters(ctx)) return input;
  jittered = DeviceBuffer(*backend_, input.size(), input.type());
  backend_->uniform_jitter(input, static_cast<float>(moe_.input_jitter_eps), jitter_key(ctx, layer_), jittered.view());
  return jittered.view();
}

// Megatron's sinkhorn of the logits (Backend::moe_sinkhorn), the scores sinkhorn routing chooses
// by in training: over each sequence-parallel rank's tokens by themselves, as Megatron's router
// sees only those.
DeviceArray<float> MoeRouter::sinkhorn_scores(const ForwardContext& ctx, ConstFloatView logits, int64_t tokens) const {
  const int64_t E = moe_.num_experts;
  DeviceArray<float> scores(*backend_, tokens * E);
  const int64_t shards = ctx.sequence_shards;
  const int64_t part = tokens / shards;
  for (int64_t s = 0; s < shards; ++s)
    backend_->moe_sinkhorn(logits.subspan(s * part * E, part * E), part, E,
                           FloatView(scores.view().data() + s * part * E, part * E));
  return scores;
}

void MoeRouter::forward(const ForwardContext& ctx, ConstFloatView input, const MoeActivations& saved,
                        const MoeScratch& scratch) const {
  MoeRoutingParams p = routing(ctx);
  const int64_t te = p.tokens * p.experts;
  DeviceBuffer jittered;
  const ConstFloatView gated = gate_input(ctx, input.first(p.tokens * gate_.in_features()), jittered);
  // --moe-router-dtype fp64: Megatron's fp64 logits feed fp32 arithmetic only (its softmax with
  // dtype=float32, the sigmoid of logits.float()); rounded to fp32 here, they are those values.
  if (moe_.router_fp64) {
    gate_.forward_fp64(gated, p.tokens, saved.logits.first(te));
  } else {
    gate_.forward(gated, p.tokens, saved.logits.first(te));
  }
  // Megatron's apply_random_logits: the routing (and the backward, which reads these logits)
  // sees the random ones; their gradient goes to the gate unchanged.
  if (moe_.force_load_balancing) backend_->standard_normal(random_logits_key(ctx, layer_, te), saved.logits.first(te));
  DeviceArray<float> balanced;
  if (p.sinkhorn && ctx.training) {
    balanced = sinkhorn_scores(ctx, saved.logits.first(te), p.tokens);
    p.choice_scores = balanced.view().data();
  }
  DeviceArray<double> unused;
  // A recomputed forward adds its statistics nowhere: the first one counted them.
  DeviceSpan<double> statistics = ctx.moe_statistics.empty() || ctx.recomputation
                                      ? DeviceSpan<double>()
                                      : ctx.moe_statistics.subspan(2 * layer_, 2);
  if (statistics.empty()) {
    unused = DeviceArray<double>(*backend_, 2);
    statistics = unused.view();
  }
  const FloatView aux_counts = saved.aux_counts.first(p.aux_groups * p.experts);
  backend_->moe_route(saved.logits.first(te), p, scratch.gates.first(te), saved.probs.first(te),
                      saved.routing_map.first(te), aux_counts, statistics, /*accumulate=*/true);
  if (p.aux_groups > 0 && p.aux_partitions > 1) {
    // switch_load_balancing_loss_func all-reduces tokens_per_expert over the group and divides by
    // num_tokens · group size; sequence_load_balancing_loss_func gathers the scores instead and
    // counts locally, whose loss summed over the group, and gradient, are the same. Each rank's
    // statistic here is its tokens' scores against the summed counts: their sum over the group is
    // the whole micro-batch's loss, as Megatron's tracker sums it over the group
    // (save_to_aux_losses_tracker's reduce_group; train/training_step.cpp). The backward reads the
    // sums. A recomputed forward reduces them again (its first pass counted this rank's only).
    ctx.context_parallel->group().all_reduce(aux_counts, dist::ReduceOp::Sum);
    MoeRoutingParams summed = p;
    summed.aux_from_counts = true;
    backend_->moe_route(saved.logits.first(te), summed, scratch.gates.first(te), saved.probs.first(te),
                        saved.routing_map.first(te), aux_counts, statistics, /*accumulate=*/true);
  }
  if (ctx.sequence_parallel() && p.capacity >= 0) {
    // Megatron routes each sequence-parallel rank's tokens by themselves: an expert's capacity is
    // that of a rank's tokens and the drops are among them. The auxiliary losses (above) do not
    // depend on the capacity; the backward reads only the routing map of the drops.
    MoeRoutingParams part = p;
    part.tokens = ctx.local_tokens();
    part.capacity = moe_capacity(moe_, part.tokens);
    part.aux_groups = 0;
    part.z_loss = false;
    const int64_t n = part.tokens * p.experts;
    for (int64_t s = 0; s < ctx.sequence_shards; ++s)
      backend_->moe_route(saved.logits.subspan(s * n, n), part, scratch.gates.subspan(s * n, n),
                          saved.probs.subspan(s * n, n), saved.routing_map.subspan(s * n, n),
                          saved.aux_counts.first(0), statistics, /*accumulate=*/true);  // adds 0
  }
  // _apply_expert_bias: the routing map after the capacity, counted in training only. Padded to
  // the capacity, Megatron's map is the capacity mask, `capacity` tokens in every expert's
  // column: equal counts, whose update moves no bias; none are counted here.
  const FloatView tokens_per_expert = expert_bias_->tokens_per_expert(layer_);
  const bool padded = p.capacity >= 0 && moe_.pad_to_capacity;
  if (ctx.training && !ctx.recomputation && !padded && !tokens_per_expert.empty())
    backend_->bias_backward(saved.routing_map.first(te), p.tokens, p.experts, tokens_per_expert);
}

void MoeRouter::backward(const ForwardContext& ctx, ConstFloatView input, const MoeActivations& saved,
                         const MoeScratch& scratch, FloatView d_input) const {
  const MoeRoutingParams p = routing(ctx);
  const int64_t te = p.tokens * p.experts;
  const float aux_grad = static_cast<float>(moe_.aux_loss_coeff) * ctx.moe_loss_grad_scale;
  // Megatron's apply_z_loss divides the coefficient by the tensor x context-parallel group's size
  // (megatron/core/transformer/moe/router.py): each rank's z-loss is the mean over its tokens.
  // Its sequence-parallel ranks' gradients are summed, which makes the mean over the tensor-
  // parallel group's tokens: what this router, routing them all on every tensor-parallel rank,
  // computes directly. Only the context-parallel factor remains.
  //
  // Under context parallelism neither auxiliary loss's gradient is then the one-rank run's:
  // Megatron averages the gradients over the data-parallel group with context parallelism
  // (megatron/core/distributed/distributed_data_parallel.py: 1 / dp_cp size) while
  // MoEAuxLossAutoScaler's scale is 1 / num_microbatches (megatron/core/pipeline_parallel/
  // schedules.py) and the ranks' auxiliary losses sum to the whole sequence's (the z-losses, with
  // the coefficient so divided, too): the auxiliary losses act with their coefficients divided by
  // the context-parallel size. mgt does as Megatron; the logged values are the one-rank run's.
  const float z_grad = static_cast<float>(moe_.z_loss_coeff) * ctx.moe_loss_grad_scale /
                       static_cast<float>(context_parallel_ranks(ctx));
  backend_->moe_route_backward(saved.logits.first(te), p, scratch.d_probs.first(te), saved.routing_map.first(te),
                               saved.aux_counts.first(p.aux_groups * p.experts), aux_grad, z_grad,
                               scratch.d_logits.first(te));
  const int64_t h = gate_.in_features();
  const FloatView dx = scratch.d_hidden.first(p.tokens * h);
  // With the jitter the gate read input · noise: its weight's gradient takes that again (the noise
  // regenerated from its key), and the input's gradient is the gate's times the noise.
  DeviceBuffer jittered;
  const ConstFloatView gated = gate_input(ctx, input.first(p.tokens * h), jittered);
  const FloatView dx_wanted = d_input.empty() ? FloatView() : dx;
  if (moe_.router_fp64) {
    // The fp32 logits' gradient as it is: the fp64 GEMMs read it exactly.
    gate_.backward_fp64(scratch.d_logits.first(te), gated, p.tokens, dx_wanted);
  } else {
    backward_gate(scratch.d_logits.first(te), gated, p.tokens, dx_wanted);
  }
  if (d_input.empty()) return;
  if (jitters(ctx)) backend_->uniform_jitter(dx, static_cast<float>(moe_.input_jitter_eps), jitter_key(ctx, layer_), dx);
  backend_->accumulate(d_input, dx);
}

void MoeRouter::backward_gate(ConstFloatView d_logits, ConstFloatView gated, int64_t tokens, FloatView dx) const {
  // The logits' gradient is fp32 (the router's type); the gate's GEMMs take operands of one type:
  // under bf16 activations it is rounded to theirs, as the gradient of Megatron's bf16 gating GEMM.
  DeviceBuffer rounded;
  if (d_logits.type() != gated.type()) {
    rounded = DeviceBuffer(*backend_, d_logits.size(), gated.type());
    backend_->convert(d_logits, rounded.view());
    d_logits = rounded.view();
  }
  gate_.backward(d_logits, gated, tokens, dx);
}

}  // namespace mgt
