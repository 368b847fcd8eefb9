// What every block needs to know about the pass it is part of: the micro-batch shape, whether
// dropout is active, and the key material its dropout masks come from.
//
// Dropout masks are never stored. Each site draws from its own Philox stream
//   stream = micro_step · 2²⁴ + (layer + 1) · 4 + site     (layer −1: the embedding)
// under key = seed, with the element's index in the site's [s, b, …] tensor as the counter. A
// recomputed forward (activation recomputation) and a resumed run therefore regenerate exactly
// the same masks, and a sharded tensor draws exactly its slice of the unsharded mask:
//  - a sequence-parallel rank's hidden states are one contiguous block of the [s, b, h] tensor,
//    so its dropout starts at that block's first index (hidden_key);
//  - a tensor-parallel rank's attention probabilities are its heads of [b, heads, s, s], so the
//    attention kernel numbers them with the global head index (AttentionParams::dropout_heads,
//    dropout_first_head).
// Megatron instead draws dropout inside the tensor-parallel region from a per-rank RNG stream
// (tensor_parallel/random.py's model-parallel tracker), so its TP runs differ from its TP = 1
// runs; mgt's masks are the same for every TP and SP layout, and a TP run reproduces the
// single-rank run exactly.
#pragma once
#include <cstdint>

#include "kernels/backend.hpp"

namespace mgt {

class ContextParallelAttention;

enum class DropoutSite : uint64_t {
  kEmbedding = 0,        // after the embedding sum
  kAttentionProbs = 1,   // softmax probabilities (--attention-dropout)
  kAttentionOutput = 2,  // after linear_proj, before the residual add
  kMlpOutput = 3,        // after linear_fc2, before the residual add
};

struct DropoutRng {
  uint64_t seed = 1234;  // --seed
  // Distinct for every micro-batch of a run, e.g. iteration · num_microbatches + micro-batch.
  uint64_t micro_step = 0;  // < 2⁴⁰
};

// Throws mgt::Error when micro_step or layer do not fit their fields.
DropoutKey dropout_key(const DropoutRng& rng, int64_t layer, DropoutSite site);

struct ForwardContext {
  int64_t seq = 0;
  int64_t batch = 0;
  bool training = false;  // dropout active
  DropoutRng rng;
  // Sequence parallelism in this pass: the activations outside the tensor-parallel regions
  // (norms, dropouts, residuals) hold only tokens [shard, shard + 1) · local_tokens() of the
  // sequence-major [s, b] token grid. 1 and 0 without it.
  int64_t sequence_shards = 1;
  int64_t sequence_shard = 0;
  // Context parallelism in this pass (training only): seq is this rank's two chunks of the
  // sequence (context_parallel_split.hpp) and the core attention runs over the group
  // (context_parallel_attention.hpp). Null without it.
  ContextParallelAttention* context_parallel = nullptr;

  // Mixture of Experts (model/moe_layer.hpp): where the MoE layers add their auxiliary-loss and
  // z-loss statistics, [2 · num_layers] (aux, z per global layer; empty: not recorded), and the
  // factor on those losses' gradients, Megatron's MoEAuxLossAutoScaler scale (1 / micro-batches,
  // times the loss scale).
  DeviceSpan<double> moe_statistics = {};
  float moe_loss_grad_scale = 1.0f;
  // The forward run again in the backward (--recompute-granularity full): the same activations,
  // but nothing recorded twice (the MoE layers' statistics and expert-bias counts; Megatron's
  // checkpointed first forward runs without gradients and records nothing).
  bool recomputation = false;
  int64_t tokens() const { return seq * batch; }
  bool sequence_parallel() const { return sequence_shards > 1; }
  // Tokens of the sequence-parallel activations on this rank (all of them without SP).
  int64_t local_tokens() const { return tokens() / sequence_shards; }
  // `buffer` in a sequence-parallel pass, an empty view otherwise: how a block hands its
  // sequence-parallel scratch to the parallel linears.
  FloatView when_sequence_parallel(FloatView buffer) const {
    return sequence_parallel() ? buffer : FloatView();
  }
  // This rank's [local_tokens(), width] rows of a whole [s, b, width] tensor in a sequence-
  // parallel pass (one contiguous block); all of it otherwise.
  template <bool Const>
  FloatSpan<Const> own_rows(FloatSpan<Const> whole, int64_t width) const {
    if (!sequence_parallel()) return whole;
    return whole.subspan(sequence_shard * local_tokens() * width, local_tokens() * width);
  }
  // The probability to apply in this pass: the configured one in training, 0 in evaluation.
  float dropout_p(double configured) const {
    return training ? static_cast<float>(configured) : 0.0f;
  }
  DropoutKey key(int64_t layer, DropoutSite site) const { return dropout_key(rng, layer, site); }
  // The key of a dropout on this rank's [local_tokens(), hidden] hidden states: offset to the
  // block's first element in the whole [s, b, hidden] tensor.
  DropoutKey hidden_key(int64_t layer, DropoutSite site, int64_t hidden) const {
    DropoutKey k = key(layer, site);
    k.offset += static_cast<uint64_t>(sequence_shard * local_tokens() * hidden);
    return k;
  }
};

}  // namespace mgt
