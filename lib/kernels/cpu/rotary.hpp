// Rotary position embedding (--position-embedding-type rope), Megatron's non-interleaved
// "rotate half" form: the first rotary_dim channels of each head are split in halves x1, x2 and
//   y1 = x1·cos θ − x2·sin θ,   y2 = x2·cos θ + x1·sin θ,
// with θ(pos, i) = pos · base^(−2i/rotary_dim) for i < rotary_dim/2; the remaining channels pass
// through. rotary_dim = int(head_dim · rotary_percent) (rotary_dim_for). With Llama 3.1's scaling
// (--use-rope-scaling) each inverse frequency base^(−2i/rotary_dim) first goes through
// llama3_scaled_inv_freq.
#pragma once
#include <cstdint>

#include "kernels/cpu/head_layout.hpp"

namespace mgt::cpu {

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

// Megatron's int(kv_channels · rotary_percent).
int64_t rotary_dim_for(int64_t head_dim, double rotary_percent);

// y = rope(x) over a [seq, batch, heads, head_dim] (or batch-major) tensor; y may alias x.
void rotary_forward(const float* x, const HeadTensor& shape, const RotaryParams& params, float* y);

// dx = ropeᵀ(dy): the rotation by −θ. dx may alias dy.
void rotary_backward(const float* dy, const HeadTensor& shape, const RotaryParams& params,
                     float* dx);

}  // namespace mgt::cpu
