// The plain descriptors that backend operations take beside their views: where a head's rows
// live, the attention shape and parameters, the rotary and dropout parameters, AdamW's
// hyper-parameters and the masked loss sums. Public (kernels/backend.hpp takes them), defined
// once, and shared by the CPU kernels and the CUDA kernels (the members that address memory are
// constexpr so that device code can call them).
#pragma once
#include <cstdint>

namespace mgt {

// ---- head layout ----
// Megatron keeps activations sequence-major, [s, b, heads, head_dim] (so sequence parallelism
// splits the outermost dimension); inference code often prefers batch-major [b, s, heads,
// head_dim]. Attention and rotary accept either, and address one (batch, head) pair as a strided
// [s, head_dim] matrix.
enum class SeqLayout {
  kSeqMajor,    // [seq, batch, heads, head_dim], Megatron's layout
  kBatchMajor,  // [batch, seq, heads, head_dim]
};

struct HeadTensor {
  int64_t seq = 0;
  int64_t batch = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;
  SeqLayout layout = SeqLayout::kSeqMajor;

  constexpr int64_t elements() const { return seq * batch * heads * head_dim; }

  // Offset of element (s, b, h, 0).
  constexpr int64_t offset(int64_t s, int64_t b, int64_t h) const {
    return layout == SeqLayout::kSeqMajor ? ((s * batch + b) * heads + h) * head_dim
                                          : ((b * seq + s) * heads + h) * head_dim;
  }

  // Distance between (s, b, h, 0) and (s + 1, b, h, 0).
  constexpr int64_t seq_stride() const {
    return layout == SeqLayout::kSeqMajor ? batch * heads * head_dim : heads * head_dim;
  }
};

// ---- dropout ----
// The key of a dropout mask drawn from Philox4x32-10 (the stream is specified in
// kernels/cpu/dropout.hpp): the mask is a pure function of it, never stored.
struct DropoutKey {
  uint64_t seed = 0;
  uint64_t stream = 0;  // separates independent uses (layer, site, iteration) under one seed
  uint64_t offset = 0;  // global index of the first element of the call
};

// ---- attention ----
// q and out [seq_q, batch, heads, head_dim], k and v [seq_kv, batch, groups, head_dim] (or all
// batch-major); query head h reads key/value group h / (heads / groups). The causal mask is
// aligned at the end: query i sees keys j <= i + (seq_kv − seq_q). Without it (AttentionParams::
// causal false: the blocks of ring attention that lie wholly below the diagonal) every query
// sees every key, and seq_kv may be shorter than seq_q.
struct AttentionShape {
  int64_t batch = 0;
  int64_t seq_q = 0;
  int64_t seq_kv = 0;  // >= seq_q when causal
  int64_t heads = 0;   // query heads (local to this rank)
  int64_t groups = 0;  // key/value heads; divides heads
  int64_t head_dim = 0;
  SeqLayout layout = SeqLayout::kSeqMajor;

  constexpr HeadTensor query() const { return {seq_q, batch, heads, head_dim, layout}; }
  constexpr HeadTensor key_value() const { return {seq_kv, batch, groups, head_dim, layout}; }
};

struct AttentionParams {
  float softmax_scale = 0.0f;  // usually 1/√head_dim
  float dropout_p = 0.0f;      // --attention-dropout
  DropoutKey dropout_key;
  // The heads of the whole (unsharded) attention that the dropout index counts, and the first
  // of them this call holds; 0 and 0: this call's heads are all of them.
  int64_t dropout_heads = 0;
  int64_t dropout_first_head = 0;
  // The end-aligned causal mask (false: none; context parallelism's off-diagonal blocks).
  bool causal = true;
};

// The key index after the last one query i may see, of seq_kv keys.
constexpr int64_t attention_visible_end(const AttentionShape& s, const AttentionParams& p, int64_t i) {
  return p.causal ? i + (s.seq_kv - s.seq_q) + 1 : s.seq_kv;
}

// ---- rotary position embedding ----
struct RotaryParams {
  int64_t rotary_dim = 0;      // even, 0 < rotary_dim <= head_dim
  double base = 10000.0;       // --rotary-base
  int64_t position_offset = 0; // position of sequence index 0 (KV-cached decoding, CP chunks)
  double llama3_scaling_factor = 0.0;  // --rope-scaling-factor with --use-rope-scaling; 0: no scaling
};

// Megatron's RotaryEmbedding._apply_scaling (megatron/core/models/common/embeddings/
// rotary_pos_embedding.py), Llama 3.1's rule with its fixed low_freq_factor 1, high_freq_factor 4
// and original_max_position_embeddings 8192: wavelengths below 8192/4 positions keep their
// frequency, those above 8192 are slowed down by `factor`, and those between are interpolated.
// factor 0 leaves inv_freq as it is. constexpr so that the CUDA kernel calls the same code.
constexpr double llama3_scaled_inv_freq(double inv_freq, double factor) {
  if (factor == 0.0) return inv_freq;
  constexpr double kLowFreqFactor = 1.0;
  constexpr double kHighFreqFactor = 4.0;
  constexpr double kOriginalMaxPositions = 8192.0;
  constexpr double kPi = 3.14159265358979323846;
  const double wavelen = 2.0 * kPi / inv_freq;
  if (wavelen < kOriginalMaxPositions / kHighFreqFactor) return inv_freq;
  if (wavelen > kOriginalMaxPositions / kLowFreqFactor) return inv_freq / factor;
  const double smooth = (kOriginalMaxPositions / wavelen - kLowFreqFactor) / (kHighFreqFactor - kLowFreqFactor);
  return (1.0 - smooth) * inv_freq / factor + smooth * inv_freq;
}

// ---- loss ----
struct MaskedLossSum {
  double loss_sum = 0.0;  // Σ loss·mask
  double tokens = 0.0;    // Σ mask
};

// ---- optimizer ----
// AdamW's hyper-parameters (kernels/cpu/adamw.hpp gives the update rule).
struct AdamWParams {
  float lr = 0.0f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

}  // namespace mgt
