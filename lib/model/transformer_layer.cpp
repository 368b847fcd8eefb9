#include "model/transformer_layer.hpp"

#include "model/recompute_plan.hpp"

namespace mgt {

TransformerLayer::TransformerLayer(GptParameters& params, int64_t layer,
                                   const TensorParallelMappings& tp, Fp8Training* fp8,
                                   dist::Communicator* expert_group)
    : backend_(&params.backend()),
      layer_(layer),
      hidden_dropout_(params.config().hidden_dropout),
      tp_(&tp),
      recompute_core_attention_(recomputes_core_attention(params.config(), true)),
      recompute_layernorm_(recomputes_layernorm(params.config(), true)),
      recompute_mlp_(recomputes_mlp(params.config(), true)),
      recompute_moe_(recomputes_moe(params.config(), true)),
      input_norm_(params, layer_prefix(layer) + ".input_layernorm"),
      attention_(params, layer, tp, fp8),
      pre_mlp_norm_(params, layer_prefix(layer) + ".pre_mlp_layernorm") {
  const bool moe_layer = params.config().moe.is_moe_layer(layer);
  if (moe_layer) {
    moe_.emplace(params, layer, expert_group, &tp, fp8);
  } else {
    mlp_.emplace(params, layer, tp, fp8);
  }
  if (fp8) norm_casts_ = layer_norm_fp8_casts(params.config(), moe_layer);
}

void TransformerLayer::forward(const ForwardContext& ctx, ConstFloatView input,
                               const LayerActivations& saved, const LayerScratch& scratch,
                               FloatView output, const LayerKvCache* cache) const {
  const int64_t tokens = ctx.local_tokens();
  const int64_t hidden = input_norm_.hidden();
  const float p = ctx.dropout_p(hidden_dropout_);
  const FloatView branch = scratch.hidden_a;
  // Under sequence parallelism each branch's output is branch + rest: the row-parallel ring's
  // last addition goes into the add-norm and the residual add, which read branch anyway. Dropout
  // needs the sum first.
  ConstFloatView rest;
  ConstFloatView* const unsummed = p > 0.0f ? nullptr : &rest;

  // Under sequence parallelism the norms write this rank's rows of their whole outputs, which the
  // attention and the MLP then all-gather in place and keep for their backward.
  // Where the norms cast their outputs for linear_qkv and linear_fc1 (norm_fp8_cast.hpp), those
  // outputs are not written: the attention and the MLP are given them unwritten (or empty).
  const bool cast_input_norm = norm_casts_.input_norm && !ctx.sequence_parallel();
  const bool cast_pre_mlp_norm = norm_casts_.pre_mlp_norm && !ctx.sequence_parallel();
  if (cast_input_norm) {
    attention_.qkv().take_cast_input(tokens, [&](const Fp8Scaling& scaling, Fp8View codes) {
      input_norm_.fp8_forward(input, tokens, scaling, codes, saved.input_norm);
    });
  } else {
    input_norm_.forward(input, tokens, ctx.own_rows(saved.input_norm_output, hidden), saved.input_norm);
  }
  attention_.forward(ctx, saved.input_norm_output, saved.attention, scratch.attention, branch, cache, unsummed);
  if (p > 0.0f) {
    const DropoutKey key = ctx.hidden_key(layer_, DropoutSite::kAttentionOutput, hidden);
    backend_->dropout_forward(branch, p, key, branch);
  }
  if (cast_pre_mlp_norm) {
    mlp_->fc1().take_cast_input(tokens, [&](const Fp8Scaling& scaling, Fp8View codes) {
      pre_mlp_norm_.fp8_add_forward(input, branch, saved.residual, tokens, scaling, codes, saved.pre_mlp_norm, rest);
    });
  } else {
    pre_mlp_norm_.add_forward(input, branch, saved.residual, tokens,
                              ctx.own_rows(saved.pre_mlp_norm_output, hidden), saved.pre_mlp_norm, rest);
  }
  if (moe_) {
    // The MoE layer reduces its output itself: nothing is left unsummed.
    moe_->forward(ctx, saved.pre_mlp_norm_output, saved.moe, scratch.moe, branch);
    rest = {};
  } else {
    mlp_->forward(ctx, saved.pre_mlp_norm_output, saved.mlp, scratch.mlp, branch, unsummed);
  }
  if (p > 0.0f) {
    backend_->dropout_forward(branch, p, ctx.hidden_key(layer_, DropoutSite::kMlpOutput, hidden),
                              branch);
  }
  backend_->add(saved.residual, branch, output, rest);
}

void TransformerLayer::backward(const ForwardContext& ctx, ConstFloatView input,
                                const LayerActivations& saved, const LayerScratch& scratch,
                                FloatView d_hidden) const {
  const int64_t tokens = ctx.local_tokens();
  const int64_t hidden = input_norm_.hidden();
  const float p = ctx.dropout_p(hidden_dropout_);
  const FloatView a = scratch.hidden_a;
  const FloatView b = scratch.hidden_b;

  // MLP branch: d_hidden is ∂/∂y; the residual passes it to h unchanged.
  ConstFloatView d_branch = d_hidden;
  if (p > 0.0f) {
    backend_->dropout_backward(d_hidden, p, ctx.hidden_key(layer_, DropoutSite::kMlpOutput, hidden),
                               a);
    d_branch = a;
  }
  // Under sequence parallelism fc1's weight gradient waits for the attention projection's
  // all-gather, beside which it runs (Mlp::backward): that GEMM of this rank's rows alone is too
  // short to hide the collective. The results are the same bits as in its own layer's backward.
  DeferredGemm fc1_weight;
  const bool rerun_mlp = recompute_mlp_ && mlp_;
  const bool rerun_moe = recompute_moe_ && moe_;
  if (recompute_layernorm_)
    recompute_norm(ctx, pre_mlp_norm_, saved.residual, saved.pre_mlp_norm, saved.pre_mlp_norm_output,
                   rerun_mlp || rerun_moe);
  // The MLP's forward again, into b (free until the MLP's backward writes its input gradient
  // there): its fc1 and activation outputs are what the backward reads; its output is dropped.
  if (rerun_mlp) mlp_->forward(ctx, saved.pre_mlp_norm_output, saved.mlp, scratch.mlp, b);
  // The MoE layer's likewise: the routing, the dispatch's tables and rows and the experts'
  // outputs, the same bits as its forward's (its statistics not counted again).
  if (rerun_moe) {
    ForwardContext again = ctx;
    again.recomputation = true;
    moe_->forward(again, saved.pre_mlp_norm_output, saved.moe, scratch.moe, b);
  }
  if (moe_) {
    moe_->backward(ctx, saved.pre_mlp_norm_output, saved.moe, scratch.moe, d_branch, b);
  } else {
    mlp_->backward(ctx, saved.pre_mlp_norm_output, saved.mlp, scratch.mlp, d_branch, b,
                   ctx.sequence_parallel() ? &fc1_weight : nullptr);
  }
  pre_mlp_norm_.backward(b, saved.residual, tokens, saved.pre_mlp_norm, d_hidden, /*accumulate_dx=*/true);
  // d_hidden is now ∂/∂h.

  // Attention branch.
  d_branch = d_hidden;
  if (p > 0.0f) {
    backend_->dropout_backward(d_hidden, p,
                               ctx.hidden_key(layer_, DropoutSite::kAttentionOutput, hidden), a);
    d_branch = a;
  }
  if (recompute_layernorm_)
    recompute_norm(ctx, input_norm_, input, saved.input_norm, saved.input_norm_output, false);
  if (recompute_core_attention_) attention_.recompute_core(ctx, saved.attention);
  attention_.backward(ctx, saved.input_norm_output, saved.attention, scratch.attention, d_branch,
                      b, fc1_weight);
  input_norm_.backward(b, input, tokens, saved.input_norm, d_hidden, /*accumulate_dx=*/true);
  // d_hidden is now ∂/∂x.
}

void TransformerLayer::recompute_norm(const ForwardContext& ctx, const NormLayer& norm, ConstFloatView input,
                                      const NormStats& stats, FloatView output, bool gathered_later) const {
  const int64_t hidden = norm.hidden();
  // The forward's statistics come out again with the same bits; the norm's backward reads them.
  norm.forward(input, ctx.local_tokens(), ctx.own_rows(output, hidden), stats);
  if (ctx.sequence_parallel() && !gathered_later)
    tp_->gather_from_sequence_parallel_region_forward(ctx.own_rows(output, hidden), output);
}

}  // namespace mgt
