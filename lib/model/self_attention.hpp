// Megatron's SelfAttention block: fused QKV projection (per-group interleaved layout), with
// --qk-layernorm a norm of each query and key head, RoPE on queries and keys, causal core
// attention with grouped-query heads, output projection linear_proj. Activations are
// sequence-major, [s, b, heads, head_dim].
//
// Tensor parallelism: linear_qkv is column-parallel and linear_proj row-parallel, so each rank
// holds heads/tp query heads and groups/tp whole key/value groups (its shard of the fused QKV
// rows is g/tp consecutive groups of Megatron's per-group layout) and runs the core attention
// on those alone.
//
// Context parallelism (ForwardContext::context_parallel): the sequence rows are this rank's two
// chunks of the sequence; RoPE turns each chunk from its own first position and the core
// attention runs over the context-parallel group (context_parallel_attention.hpp).
#pragma once
#include <cstdint>
#include <optional>

#include "kernels/backend.hpp"
#include "model/forward_context.hpp"
#include "model/kv_cache.hpp"
#include "model/gpt_parameters.hpp"
#include "model/norm_layer.hpp"
#include "model/parallel_linear.hpp"
#include "model/tensor_parallel_mappings.hpp"

namespace mgt {

// Saved by the forward for the backward.
struct AttentionActivations {
  FloatView query;  // [s, b, heads, k], after RoPE
  FloatView key;    // [s, b, groups, k], after RoPE
  FloatView value;  // [s, b, groups, k]
  // The QKV projection's output [s, b, heads, 3, k] instead of the three, where the backend
  // attends to it in place (Backend::attends_fused_qkv: no RoPE, groups == heads). It may share
  // their memory.
  FloatView mixed;
  // Core attention output [s, b, heads, k] and softmax normalisers [b, heads, s]. Selective
  // recomputation points these at buffers shared by all layers and rebuilds them in the backward.
  FloatView context;
  FloatView lse;
  // --qk-layernorm only: the split query and key before their norms (query and key above are
  // after them), and the norms' statistics, a row per head and token.
  FloatView query_input;  // [s, b, heads, k]
  FloatView key_input;    // [s, b, groups, k]
  NormStats query_norm;
  NormStats key_norm;
};

// Temporaries, shared by all layers.
struct AttentionScratch {
  FloatView mixed;  // [s, b, (heads + 2·groups)·k]: QKV output, then its gradient
  FloatView d_context;
  FloatView d_query;
  FloatView d_key;
  FloatView d_value;
  // --qk-layernorm, training only: the gradients of query_input and key_input.
  FloatView d_query_input;
  FloatView d_key_input;
  SequenceParallelScratch sequence;  // under sequence parallelism
};

class SelfAttention {
public:
  // `tp` must outlive the block.
  // With `fp8`, linear_qkv and linear_proj compute in FP8 (LinearLayer).
  SelfAttention(GptParameters& params, int64_t layer, const TensorParallelMappings& tp, Fp8Training* fp8 = nullptr);

  int64_t heads() const { return heads_; }    // local to this tensor-parallel rank
  int64_t groups() const { return groups_; }  // local
  int64_t head_dim() const { return head_dim_; }
  const ColumnParallelLinear& qkv() const { return qkv_; }

  // output[s, b, hidden] = linear_proj(attention(rope(split(linear_qkv(input))))); under
  // sequence parallelism output is this rank's [s/tp, b, hidden] slice, and input the whole
  // [s, b, hidden] tensor of which only this rank's rows are filled: the forward all-gathers the
  // others' into it, and the backward reads it as the forward left it.
  //
  // With a key/value cache (inference): the s = ctx.seq tokens of this pass follow the cache's
  // length (read from backend memory, so that a recorded decode step replays at any length).
  // Their keys and values are also stored into the cache there, RoPE rotates them by their true
  // positions, and the queries attend to all length + s positions.
  // With `addend`, output's last addend may be left unadded (RowParallelLinear::forward).
  void forward(const ForwardContext& ctx, FloatView input, const AttentionActivations& saved,
               const AttentionScratch& scratch, FloatView output,
               const LayerKvCache* cache = nullptr, ConstFloatView* addend = nullptr) const;
  // Rebuilds saved.context and saved.lse from the saved query, key and value (or projection).
  void recompute_core(const ForwardContext& ctx, const AttentionActivations& saved) const;
  // Accumulates parameter gradients; d_input = ∂loss/∂input (overwritten). `beside` runs beside
  // the projection's first collective (under sequence parallelism the all-gather of its output
  // gradient, which its own rows' input gradient alone is too short to hide), else at once.
  void backward(const ForwardContext& ctx, FloatView input, const AttentionActivations& saved,
                const AttentionScratch& scratch, ConstFloatView d_output, FloatView d_input,
                const DeferredGemm& beside = {}) const;

private:
  AttentionShape shape(const ForwardContext& ctx) const;
  AttentionParams params(const ForwardContext& ctx) const;
  HeadTensor head_tensor(const ForwardContext& ctx, int64_t heads) const;
  // Whether this pass attends to the QKV projection in place (saved.mixed) rather than to the
  // split query, key and value.
  bool attends_fused_qkv(const ForwardContext& ctx) const;
  // RoPE (or its backward) in place on x [s, b, heads, head_dim], at this pass's positions.
  void rotate(const ForwardContext& ctx, FloatView x, int64_t heads, bool backward) const;
  // The split of the QKV projection (scratch.mixed) into saved.query, key and value, through
  // the query and key norms with --qk-layernorm.
  void split(const ForwardContext& ctx, const AttentionActivations& saved, const AttentionScratch& scratch) const;
  // The merge of the query, key and value gradients into d_mixed, back through the query and
  // key norms with --qk-layernorm.
  void merge_gradients(const ForwardContext& ctx, const AttentionActivations& saved, const AttentionScratch& scratch,
                       FloatView d_mixed) const;

  Backend* backend_;
  int64_t layer_;
  int64_t heads_;
  int64_t groups_;
  int64_t head_dim_;
  int64_t first_head_;  // this rank's first query head among all of them
  int64_t all_heads_;
  bool rope_;
  RotaryParams rotary_;
  double attention_dropout_;
  ColumnParallelLinear qkv_;
  RowParallelLinear proj_;
  std::optional<NormLayer> query_norm_;  // --qk-layernorm only
  std::optional<NormLayer> key_norm_;
};

}  // namespace mgt
