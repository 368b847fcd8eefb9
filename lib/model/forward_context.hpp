// What every block needs to know about the pass it is part of: the micro-batch shape, whether
// dropout is active, and the key material its dropout masks come from.
//
// Dropout masks are never stored. Each site draws from its own Philox stream
//   stream = micro_step · 2²⁴ + (layer + 1) · 4 + site     (layer −1: the embedding)
// under key = seed, with the element's index in the site's [s, b, …] tensor as the counter. A
// recomputed forward (activation recomputation) and a resumed run therefore regenerate exactly
// the same masks, and a sequence-parallel shard can draw its slice by offsetting the index.
#pragma once
#include <cstdint>

#include "kernels/backend.hpp"

namespace mgt {

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

  int64_t tokens() const { return seq * batch; }
  // The probability to apply in this pass: the configured one in training, 0 in evaluation.
  float dropout_p(double configured) const {
    return training ? static_cast<float>(configured) : 0.0f;
  }
  DropoutKey key(int64_t layer, DropoutSite site) const { return dropout_key(rng, layer, site); }
};

}  // namespace mgt
