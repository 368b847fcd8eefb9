#include "model/self_attention.hpp"

#include <cmath>

#include "model/context_parallel_attention.hpp"

namespace mgt {

SelfAttention::SelfAttention(GptParameters& params, int64_t layer,
                             const TensorParallelMappings& tp, Fp8Training* fp8)
    : backend_(&params.backend()),
      layer_(layer),
      heads_(params.config().num_attention_heads / params.tensor_parallel().size),
      groups_(params.config().query_groups() / params.tensor_parallel().size),
      head_dim_(params.config().kv_channels),
      first_head_(params.tensor_parallel().rank * heads_),
      all_heads_(params.config().num_attention_heads),
      rope_(params.config().position_embedding_type == PositionEmbeddingType::kRope),
      attention_dropout_(params.config().attention_dropout),
      qkv_(params, layer_prefix(layer) + ".self_attention.linear_qkv.weight",
           layer_prefix(layer) + ".self_attention.linear_qkv.bias", tp, fp8),
      proj_(params, layer_prefix(layer) + ".self_attention.linear_proj.weight",
            layer_prefix(layer) + ".self_attention.linear_proj.bias", tp, fp8) {
  rotary_.rotary_dim = params.config().rotary_dim();
  rotary_.base = params.config().rotary_base;
  if (params.config().use_rope_scaling) rotary_.llama3_scaling_factor = params.config().rope_scaling_factor;
  rotary_.position_offset = 0;
  if (params.config().qk_layernorm) {
    query_norm_.emplace(params, layer_prefix(layer) + ".self_attention.q_layernorm", head_dim_);
    key_norm_.emplace(params, layer_prefix(layer) + ".self_attention.k_layernorm", head_dim_);
  }
}

AttentionShape SelfAttention::shape(const ForwardContext& ctx) const {
  AttentionShape s;
  s.batch = ctx.batch;
  s.seq_q = ctx.seq;
  s.seq_kv = ctx.seq;
  s.heads = heads_;
  s.groups = groups_;
  s.head_dim = head_dim_;
  s.layout = SeqLayout::kSeqMajor;
  return s;
}

AttentionParams SelfAttention::params(const ForwardContext& ctx) const {
  AttentionParams p;
  p.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim_)));
  p.dropout_p = ctx.dropout_p(attention_dropout_);
  p.dropout_key = ctx.key(layer_, DropoutSite::kAttentionProbs);
  // Numbered by the global head, so that each rank draws its heads' part of the one mask.
  p.dropout_heads = all_heads_;
  p.dropout_first_head = first_head_;
  return p;
}

HeadTensor SelfAttention::head_tensor(const ForwardContext& ctx, int64_t heads) const {
  return {ctx.seq, ctx.batch, heads, head_dim_, SeqLayout::kSeqMajor};
}

bool SelfAttention::attends_fused_qkv(const ForwardContext& ctx) const {
  return ctx.context_parallel == nullptr && !rope_ && !query_norm_ && groups_ == heads_ &&
         backend_->attends_fused_qkv(shape(ctx), params(ctx));
}

// Megatron rotates by sequence index; under context parallelism the indices are those of this
// rank's two chunks (rotary_pos_embedding.py get_pos_emb_on_this_cp_rank), so each half of the
// rows turns from its chunk's first position.
void SelfAttention::rotate(const ForwardContext& ctx, FloatView x, int64_t heads, bool backward) const {
  const auto apply = [&](FloatView part, const HeadTensor& shape, const RotaryParams& rotary) {
    if (backward) backend_->rotary_backward(part, shape, rotary, part);
    else backend_->rotary_forward(part, shape, rotary, part);
  };
  if (ctx.context_parallel == nullptr) {
    apply(x, head_tensor(ctx, heads), rotary_);
    return;
  }
  const int64_t n = ctx.context_parallel->size(), r = ctx.context_parallel->rank();
  const int64_t chunk = ctx.seq / 2;
  HeadTensor half = head_tensor(ctx, heads);
  half.seq = chunk;
  RotaryParams rotary = rotary_;
  rotary.position_offset = r * chunk;
  apply(x.first(half.elements()), half, rotary);
  rotary.position_offset = (2 * n - 1 - r) * chunk;
  apply(x.subspan(half.elements(), half.elements()), half, rotary);
}

// Megatron's get_query_key_value_tensors: the split, then q_layernorm and k_layernorm.
void SelfAttention::split(const ForwardContext& ctx, const AttentionActivations& saved,
                          const AttentionScratch& scratch) const {
  const int64_t tokens = ctx.tokens();
  if (!query_norm_) {
    backend_->qkv_split(scratch.mixed, tokens, heads_, groups_, head_dim_, saved.query, saved.key, saved.value);
    return;
  }
  backend_->qkv_split(scratch.mixed, tokens, heads_, groups_, head_dim_, saved.query_input, saved.key_input,
                      saved.value);
  query_norm_->forward(saved.query_input, tokens * heads_, saved.query, saved.query_norm);
  key_norm_->forward(saved.key_input, tokens * groups_, saved.key, saved.key_norm);
}

void SelfAttention::merge_gradients(const ForwardContext& ctx, const AttentionActivations& saved,
                                    const AttentionScratch& scratch, FloatView d_mixed) const {
  const int64_t tokens = ctx.tokens();
  if (!query_norm_) {
    backend_->qkv_merge(scratch.d_query, scratch.d_key, scratch.d_value, tokens, heads_, groups_, head_dim_,
                        d_mixed);
    return;
  }
  query_norm_->backward(scratch.d_query, saved.query_input, tokens * heads_, saved.query_norm,
                        scratch.d_query_input);
  key_norm_->backward(scratch.d_key, saved.key_input, tokens * groups_, saved.key_norm, scratch.d_key_input);
  backend_->qkv_merge(scratch.d_query_input, scratch.d_key_input, scratch.d_value, tokens, heads_, groups_,
                      head_dim_, d_mixed);
}

void SelfAttention::forward(const ForwardContext& ctx, FloatView input,
                            const AttentionActivations& saved, const AttentionScratch& scratch,
                            FloatView output, const LayerKvCache* cache, ConstFloatView* addend) const {
  const int64_t tokens = ctx.tokens();
  const bool fused = cache == nullptr && attends_fused_qkv(ctx);
  // Unsplit, the projection is what the backward reads: it goes to the saved activations.
  qkv_.forward(ctx.own_rows(input, qkv_.in_features()), tokens, fused ? saved.mixed : scratch.mixed,
               ctx.when_sequence_parallel(input));
  if (fused) {
    recompute_core(ctx, saved);
    proj_.forward(saved.context, tokens, output, ctx.when_sequence_parallel(scratch.sequence.whole), addend);
    return;
  }
  split(ctx, saved, scratch);
  if (cache) {
    AttentionShape s = shape(ctx);
    s.seq_kv = cache->capacity;
    backend_->cached_attention(saved.query, saved.key, saved.value, cache->key, cache->value, cache->length, s,
                               rope_ ? &rotary_ : nullptr, params(ctx).softmax_scale, saved.context);
  } else {
    if (rope_) {
      // Megatron rotates by sequence index; position_ids only feed learned absolute embeddings.
      rotate(ctx, saved.query, heads_, false);
      rotate(ctx, saved.key, groups_, false);
    }
    recompute_core(ctx, saved);
  }
  proj_.forward(saved.context, tokens, output, ctx.when_sequence_parallel(scratch.sequence.whole), addend);
}

void SelfAttention::recompute_core(const ForwardContext& ctx,
                                   const AttentionActivations& saved) const {
  if (attends_fused_qkv(ctx)) {
    backend_->attention_forward_fused_qkv(saved.mixed, shape(ctx), params(ctx), saved.context, saved.lse);
    return;
  }
  if (ctx.context_parallel) {
    ctx.context_parallel->forward(saved.query, saved.key, saved.value, shape(ctx), params(ctx), saved.context,
                                  saved.lse);
    return;
  }
  backend_->attention_forward(saved.query, saved.key, saved.value, shape(ctx), params(ctx),
                              saved.context, saved.lse);
}

void SelfAttention::backward(const ForwardContext& ctx, FloatView input,
                             const AttentionActivations& saved, const AttentionScratch& scratch,
                             ConstFloatView d_output, FloatView d_input, const DeferredGemm& beside) const {
  const int64_t tokens = ctx.tokens();
  proj_.backward(d_output, saved.context, tokens, scratch.d_context,
                 ctx.when_sequence_parallel(scratch.sequence.whole), beside);
  // The QKV output is not needed in the backward, so its buffer takes the gradient.
  const FloatView d_mixed = scratch.mixed;
  if (attends_fused_qkv(ctx)) {
    backend_->attention_backward_fused_qkv(saved.mixed, saved.context, scratch.d_context, saved.lse, shape(ctx),
                                           params(ctx), d_mixed);
  } else {
    if (ctx.context_parallel) {
      ctx.context_parallel->backward(saved.query, saved.key, saved.value, saved.context, scratch.d_context,
                                     saved.lse, shape(ctx), params(ctx), scratch.d_query, scratch.d_key,
                                     scratch.d_value);
    } else {
      backend_->attention_backward(saved.query, saved.key, saved.value, saved.context,
                                   scratch.d_context, saved.lse, shape(ctx), params(ctx),
                                   scratch.d_query, scratch.d_key, scratch.d_value);
    }
    if (rope_) {
      rotate(ctx, scratch.d_query, heads_, true);
      rotate(ctx, scratch.d_key, groups_, true);
    }
    merge_gradients(ctx, saved, scratch, d_mixed);
  }
  qkv_.backward(d_mixed, ctx.own_rows(input, qkv_.in_features()), tokens, d_input, ctx.when_sequence_parallel(input),
                ctx.when_sequence_parallel(scratch.sequence.whole));
}

}  // namespace mgt
