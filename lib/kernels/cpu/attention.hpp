// Causal self-attention core: O = dropout(softmax(scale · Q·Kᵀ + causal mask)) · V, per head,
// with grouped-query attention (query head h reads key/value group h / (heads / groups)).
//
// Layout (AttentionShape, kernels/operation_params.hpp): q and out are [seq_q, batch, heads,
// head_dim], k and v [seq_kv, batch, groups, head_dim] (or all batch-major). The causal mask is
// aligned at the end: query i sees keys j <= i + (seq_kv − seq_q), which is the usual mask when
// seq_q == seq_kv and the right one for a query block appended to a key/value cache.
//
// Saved state: only lse[batch, heads, seq_q], the natural log of each softmax row's normaliser
// (including the scale), as flash attention keeps it; the backward recomputes the probabilities
// from q, k and lse. The backward needs q, k, v, out, dout and lse.
//
// Attention dropout draws element (b, h, i, j) of the probability tensor at global index
// ((b·H + h₀ + h)·seq_q + i)·seq_kv + j of params.dropout_key's stream (see dropout.hpp), where
// H = params.dropout_heads (default: heads) and h₀ = params.dropout_first_head (default 0): a
// tensor-parallel rank holding heads [h₀, h₀ + heads) of H draws exactly their part of the
// unsharded mask.
#pragma once
#include <cstdint>

#include "kernels/operation_params.hpp"

namespace mgt::cpu {

// Pairs [first, end) of (batch b, query head h), numbered b·heads + h, are computed; the default
// is all of them. Disjoint ranges write disjoint outputs, so they may run concurrently.
void attention_forward(const float* q, const float* k, const float* v, const AttentionShape& shape,
                       const AttentionParams& params, float* out, float* lse, int64_t first_pair = 0,
                       int64_t end_pair = -1);

// dq is overwritten; dk and dv are overwritten with the sums over the query heads of each group.
// Pairs [first, end) of (batch b, key/value group g), numbered b·groups + g, are computed, each
// with the heads of its group in order; disjoint ranges may run concurrently.
void attention_backward(const float* q, const float* k, const float* v, const float* out,
                        const float* dout, const float* lse, const AttentionShape& shape,
                        const AttentionParams& params, float* dq, float* dk, float* dv,
                        int64_t first_pair = 0, int64_t end_pair = -1);

}  // namespace mgt::cpu
