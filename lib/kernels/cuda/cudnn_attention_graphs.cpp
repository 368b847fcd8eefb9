// The operation graphs are the ones cuDNN's fused flash-attention engines recognise (the
// "composite" SDPA graphs of cuDNN 9 before its single SDPA operation takes masks), built with
// the backend API's descriptors:
//
//   forward   S = scale · Q·Kᵀ; S = causal(S) (row ≥ col, else −∞; unmasked graphs skip it);
//             M = max S, E = exp(S − M), Z = Σ E, stats = M + ln Z, P = E / Z;
//             [dropout: P = P · bernoulli(1 − p) · 1/(1 − p)];  O = P·V
//   backward  D = Σ dO∘O · (1 − p);  P = exp(causal(scale · Q·Kᵀ − stats)) [· mask / (1 − p)];
//             dV = Pᵀ·dO;  dS = (dO·Vᵀ [· mask] − D) ∘ exp(…) [/ (1 − p)] · scale;
//             dK = dSᵀ·Q;  dQ = dS·K (accumulated in fp32, then rounded to the i/o type)
//
// with the key/value heads of a group shared by its query heads (dK, dV summed over them by a
// reduction). Q, K, V, O and their gradients are bf16 or fp16, in the caller's layout, addressed with
// strides (no transposes); the scores never leave the engine. A causal graph has as many keys as
// queries; an unmasked one (ring attention's blocks off the diagonal) may have fewer or more.
#include "kernels/cuda/cudnn_attention_graphs.hpp"

#if defined(MGT_HAVE_CUDNN)

namespace mgt::cuda::cudnn {

PlanKey make_key(bool backward, const AttentionShape& s, const AttentionParams& p, bool half, bool fused_qkv) {
  PlanKey key;
  key.fused_qkv = fused_qkv;
  key.half = half;
  key.backward = backward;
  key.batch = s.batch;
  key.seq = s.seq_q;
  key.seq_kv = s.seq_kv;
  key.causal = p.causal;
  key.heads = s.heads;
  key.groups = s.groups;
  key.head_dim = s.head_dim;
  key.batch_major = s.layout == SeqLayout::kBatchMajor;
  key.dropout_bits = std::bit_cast<uint32_t>(p.dropout_p > 0.0f ? p.dropout_p : 0.0f);
  return key;
}

namespace {

// Dimensions and strides of the graph's tensors, in cuDNN's [batch, heads, rows, cols] order.
struct Geometry {
  Dims q, q_strides;          // Q, dQ (and O, dO unless the QKV is fused)
  Dims o_strides;             // O, dO: the caller's layout
  Dims kv, kv_strides;        // K, V, dK, dV
  Dims kt, kt_strides;        // Kᵀ and Vᵀ: K and V seen transposed
  Dims scores, scores_strides;
  Dims scores_t, scores_t_strides;  // the scores seen transposed
  Dims rows, rows_strides;    // one value per query row: stats, softmax sums
  Dims packed_q_strides;      // fp32 dQ accumulator
  Dims kv_heads, packed_kv_strides;  // the per-query-head dK, dV of a group
};

Geometry geometry(const PlanKey& k) {
  const int64_t b = k.batch, s = k.seq, kv = k.seq_kv, h = k.heads, g = k.groups, d = k.head_dim;
  Geometry t;
  t.q = {b, h, s, d};
  t.kv = {b, g, kv, d};
  // HeadTensor: seq-major [s, b, heads, d] or batch-major [b, s, heads, d].
  t.q_strides = k.batch_major ? Dims{s * h * d, d, h * d, 1} : Dims{h * d, d, b * h * d, 1};
  t.kv_strides = k.batch_major ? Dims{kv * g * d, d, g * d, 1} : Dims{g * d, d, b * g * d, 1};
  t.o_strides = t.q_strides;
  // The fused projection's [s, b, heads, 3, d]: Q, K and V are every third d-vector of a head.
  if (k.fused_qkv) t.q_strides = t.kv_strides = Dims{3 * h * d, 3 * d, b * 3 * h * d, 1};
  t.kt = {b, g, d, kv};
  t.kt_strides = {t.kv_strides[0], t.kv_strides[1], 1, t.kv_strides[2]};
  t.scores = {b, h, s, kv};
  t.scores_strides = {h * s * kv, s * kv, kv, 1};
  t.scores_t = {b, h, kv, s};
  t.scores_t_strides = {h * s * kv, s * kv, 1, kv};
  t.rows = {b, h, s, 1};
  t.rows_strides = {h * s, s, 1, 1};
  t.packed_q_strides = {h * s * d, s * d, d, 1};
  t.kv_heads = {b, h, kv, d};
  t.packed_kv_strides = {h * kv * d, kv * d, d, 1};
  return t;
}

// x where row >= col, else the mask value (−∞): the causal mask of seq_q == seq_kv.
int64_t causal_mask(GraphBuilder& g, int64_t x, int64_t mask_value) {
  const int64_t row = g.temp_like(x, CUDNN_DATA_INT32);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, GraphBuilder::kNone, GraphBuilder::kNone, row,
              CUDNN_DATA_FLOAT, 2);
  const int64_t col = g.temp_like(x, CUDNN_DATA_INT32);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, GraphBuilder::kNone, GraphBuilder::kNone, col,
              CUDNN_DATA_FLOAT, 3);
  const int64_t visible = g.temp_like(x, CUDNN_DATA_BOOLEAN);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, row, col, GraphBuilder::kNone, visible, CUDNN_DATA_BOOLEAN);
  const int64_t y = g.temp_like(x);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, x, mask_value, visible, y);
  return y;
}

// The dropout mask of the scores, from the seed and offset tensors.
int64_t dropout_mask(GraphBuilder& g, const PlanKey& key, const Geometry& t) {
  const Dims one = {1, 1, 1, 1};
  const int64_t seed = g.io(kSeed, one, one, CUDNN_DATA_INT64);
  const int64_t offset = g.io(kOffset, one, one, CUDNN_DATA_INT64);
  const int64_t mask = g.temp(t.scores, t.scores_strides);
  g.bernoulli(1.0 - static_cast<double>(key.dropout()), seed, offset, mask);
  return mask;
}

}  // namespace

void build_forward(GraphBuilder& g, const PlanKey& key) {
  const cudnnDataType_t io = key.io_type();
  const Geometry t = geometry(key);
  const bool dropout = key.dropout_bits != 0;
  const int64_t q = g.io(kQ, t.q, t.q_strides, io);
  const int64_t kt = g.io(kK, t.kt, t.kt_strides, io);
  const int64_t v = g.io(kV, t.kv, t.kv_strides, io);
  const int64_t o = g.io(kO, t.q, t.o_strides, io);
  const int64_t stats = g.io(kStats, t.rows, t.rows_strides, CUDNN_DATA_FLOAT);
  const int64_t scale = g.scalar(kScale);

  const int64_t qk = g.temp(t.scores, t.scores_strides);
  g.matmul(q, kt, qk);
  const int64_t scaled = g.temp_like(qk);
  g.binary(CUDNN_POINTWISE_MUL, qk, scale, scaled);
  const int64_t s = key.causal ? causal_mask(g, scaled, g.scalar(kMaskValue)) : scaled;

  // Softmax, keeping its row statistics for the backward.
  const int64_t max = g.temp(t.rows, t.rows_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, s, max);
  const int64_t shifted = g.temp_like(s);
  g.binary(CUDNN_POINTWISE_SUB, s, max, shifted);
  const int64_t e = g.temp_like(s);
  g.unary(CUDNN_POINTWISE_EXP, shifted, e);
  const int64_t sum = g.temp(t.rows, t.rows_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  const int64_t log_sum = g.temp(t.rows, t.rows_strides);
  g.unary(CUDNN_POINTWISE_LOG, sum, log_sum);
  g.binary(CUDNN_POINTWISE_ADD, max, log_sum, stats);
  // The second matmul takes its left operand in the i/o type.
  int64_t p = g.temp_like(s, dropout ? CUDNN_DATA_FLOAT : io);
  g.binary(CUDNN_POINTWISE_DIV, e, sum, p);

  if (dropout) {
    const int64_t mask = dropout_mask(g, key, t);
    const int64_t kept = g.temp_like(s);
    g.binary(CUDNN_POINTWISE_MUL, p, mask, kept);
    const int64_t rescaled = g.temp_like(s, io);
    g.binary(CUDNN_POINTWISE_MUL, kept, g.scalar(kDropoutScale), rescaled);
    p = rescaled;
  }
  g.matmul(p, v, o);
}

void build_backward(GraphBuilder& g, const PlanKey& key) {
  const cudnnDataType_t io = key.io_type();
  const Geometry t = geometry(key);
  const bool dropout = key.dropout_bits != 0;
  const bool grouped = key.groups != key.heads;
  const int64_t q = g.io(kQ, t.q, t.q_strides, io);
  const int64_t kt = g.io(kK, t.kt, t.kt_strides, io);
  const int64_t vt = g.io(kV, t.kt, t.kt_strides, io);
  const int64_t o = g.io(kO, t.q, t.o_strides, io);
  const int64_t d_o = g.io(kDO, t.q, t.o_strides, io);
  const int64_t stats = g.io(kStats, t.rows, t.rows_strides, CUDNN_DATA_FLOAT);
  const int64_t dq = g.io(kDQ, t.q, t.q_strides, io);
  const int64_t dk = g.io(kDK, t.kv, t.kv_strides, io);
  const int64_t dv = g.io(kDV, t.kv, t.kv_strides, io);
  const int64_t softmax_sum = g.io(kSoftmaxSum, t.rows, t.rows_strides, CUDNN_DATA_FLOAT);
  const int64_t dq_accum = g.io(kDQAccum, t.q, t.packed_q_strides, CUDNN_DATA_FLOAT);
  const int64_t scale = g.scalar(kScale);
  const int64_t mask = dropout ? dropout_mask(g, key, t) : GraphBuilder::kNone;
  const int64_t dropout_scale = dropout ? g.scalar(kDropoutScale) : GraphBuilder::kNone;

  // D = Σ dO∘O per row, times the keep probability: O carries the dropout scale.
  const int64_t do_o = g.temp(t.q, t.o_strides);
  g.binary(CUDNN_POINTWISE_MUL, d_o, o, do_o);
  const int64_t row_sum = g.temp(t.rows, t.rows_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, do_o, row_sum);
  g.binary(CUDNN_POINTWISE_MUL, row_sum, g.scalar(dropout ? kDropoutKeep : kOne), softmax_sum);

  // P recomputed from the statistics.
  const int64_t qk = g.temp(t.scores, t.scores_strides);
  g.matmul(q, kt, qk);
  const int64_t scaled = g.temp_like(qk);
  g.binary(CUDNN_POINTWISE_MUL, qk, scale, scaled);
  const int64_t shifted = g.temp_like(qk);
  g.binary(CUDNN_POINTWISE_SUB, scaled, stats, shifted);
  const int64_t masked = key.causal ? causal_mask(g, shifted, g.scalar(kMaskValue)) : shifted;
  const int64_t p = g.temp_like(qk);
  g.unary(CUDNN_POINTWISE_EXP, masked, p);

  // dV = (dropped P)ᵀ·dO, summed over the query heads of a group.
  int64_t p_used = p;
  if (dropout) {
    const int64_t kept = g.temp_like(qk);
    g.binary(CUDNN_POINTWISE_MUL, p, mask, kept);
    const int64_t rescaled = g.temp_like(qk);
    g.binary(CUDNN_POINTWISE_MUL, kept, dropout_scale, rescaled);
    p_used = rescaled;
  }
  const int64_t p_t = g.temp(t.scores_t, t.scores_t_strides, io);
  g.reshape(p_used, p_t);
  if (grouped) {
    const int64_t dv_heads = g.temp(t.kv_heads, t.packed_kv_strides, io);
    g.matmul(p_t, d_o, dv_heads);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dv_heads, dv);
  } else {
    g.matmul(p_t, d_o, dv);
  }

  // dS = P ∘ (dP − D), dP = dO·Vᵀ through the dropout mask.
  int64_t dp = g.temp(t.scores, t.scores_strides);
  g.matmul(d_o, vt, dp);
  if (dropout) {
    const int64_t kept = g.temp_like(qk);
    g.binary(CUDNN_POINTWISE_MUL, dp, mask, kept);
    dp = kept;
  }
  const int64_t centred = g.temp_like(qk);
  g.binary(CUDNN_POINTWISE_SUB, dp, softmax_sum, centred);
  int64_t ds = g.temp_like(qk);
  g.binary(CUDNN_POINTWISE_MUL, centred, p, ds);
  if (dropout) {
    const int64_t rescaled = g.temp_like(qk);
    g.binary(CUDNN_POINTWISE_MUL, ds, dropout_scale, rescaled);
    ds = rescaled;
  }
  const int64_t ds_scaled = g.temp_like(qk);
  g.binary(CUDNN_POINTWISE_MUL, ds, scale, ds_scaled);

  // dK = dSᵀ·Q, summed over the query heads of a group.
  const int64_t ds_t = g.temp(t.scores_t, t.scores_t_strides, io);
  g.reshape(ds_scaled, ds_t);
  if (grouped) {
    const int64_t dk_heads = g.temp(t.kv_heads, t.packed_kv_strides, io);
    g.matmul(ds_t, q, dk_heads);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dk_heads, dk);
  } else {
    g.matmul(ds_t, q, dk);
  }

  // dQ = dS·K, accumulated in fp32 scratch, then rounded.
  const int64_t k = g.temp(t.kv, t.kv_strides);
  g.reshape(kt, k);
  g.matmul(ds_scaled, k, dq_accum);
  g.unary(CUDNN_POINTWISE_IDENTITY, dq_accum, dq);
}

}  // namespace mgt::cuda::cudnn

#endif  // MGT_HAVE_CUDNN
