#include "model/moe_router.hpp"

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
  p.z_loss = ctx.training && moe_.z_loss;
  return p;
}

ConstFloatView MoeRouter::gate_input(const ForwardContext& ctx, ConstFloatView input, DeviceBuffer& jittered) const {
  if (!jitters(ctx)) return input;
  jittered = DeviceBuffer(*backend_, input.size(), input.type());
  backend_->uniform_jitter(input, static_cast<float>(moe_.input_jitter_eps), jitter_key(ctx, layer_), jittered.view());
  return jittered.view();
}

void MoeRouter::forward(const ForwardContext& ctx, ConstFloatView input, const MoeActivations& saved,
                        const MoeScratch& scratch) const {
  const MoeRoutingParams p = routing(ctx);
  const int64_t te = p.tokens * p.experts;
  DeviceBuffer jittered;
  gate_.forward(gate_input(ctx, input.first(p.tokens * gate_.in_features()), jittered), p.tokens,
                saved.logits.first(te));
  DeviceArray<double> unused;
  // A recomputed forward adds its statistics nowhere: the first one counted them.
  DeviceSpan<double> statistics = ctx.moe_statistics.empty() || ctx.recomputation
                                      ? DeviceSpan<double>()
                                      : ctx.moe_statistics.subspan(2 * layer_, 2);
  if (statistics.empty()) {
    unused = DeviceArray<double>(*backend_, 2);
    statistics = unused.view();
  }
  backend_->moe_route(saved.logits.first(te), p, scratch.gates.first(te), saved.probs.first(te),
                      saved.routing_map.first(te), saved.aux_counts.first(p.aux_groups * p.experts), statistics,
                      /*accumulate=*/true);
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
  const float z_grad = static_cast<float>(moe_.z_loss_coeff) * ctx.moe_loss_grad_scale;
  backend_->moe_route_backward(saved.logits.first(te), p, scratch.d_probs.first(te), saved.routing_map.first(te),
                               saved.aux_counts.first(p.aux_groups * p.experts), aux_grad, z_grad,
                               scratch.d_logits.first(te));
  const int64_t h = gate_.in_features();
  const FloatView dx = scratch.d_hidden.first(p.tokens * h);
  // The logits' gradient is fp32 (the router's type); the gate's GEMMs take operands of one type:
  // under bf16 activations it is rounded to theirs, as the gradient of Megatron's bf16 gating GEMM.
  ConstFloatView d_logits = scratch.d_logits.first(te);
  DeviceBuffer rounded;
  if (d_logits.type() != input.type()) {
    rounded = DeviceBuffer(*backend_, te, input.type());
    backend_->convert(d_logits, rounded.view());
    d_logits = rounded.view();
  }
  // With the jitter the gate read input · noise: its weight's gradient takes that again (the noise
  // regenerated from its key), and the input's gradient is the gate's times the noise.
  DeviceBuffer jittered;
  gate_.backward(d_logits, gate_input(ctx, input.first(p.tokens * h), jittered), p.tokens, dx);
  if (d_input.empty()) return;
  if (jitters(ctx)) backend_->uniform_jitter(dx, static_cast<float>(moe_.input_jitter_eps), jitter_key(ctx, layer_), dx);
  backend_->accumulate(d_input, dx);
}

}  // namespace mgt
