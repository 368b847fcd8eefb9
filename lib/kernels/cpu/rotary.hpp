// Rotary position embedding (--position-embedding-type rope), Megatron's non-interleaved
// "rotate half" form: the first rotary_dim channels of each head are split in halves x1, x2 and
//   y1 = x1·cos θ − x2·sin θ,   y2 = x2·cos θ + x1·sin θ,
// with θ(pos, i) = pos · base^(−2i/rotary_dim) for i < rotary_dim/2; the remaining channels pass
// through. rotary_dim = int(head_dim · rotary_percent) (rotary_dim_for). With Llama 3.1's scaling
// (--use-rope-scaling) each inverse frequency base^(−2i/rotary_dim) first goes through
// llama3_scaled_inv_freq (kernels/operation_params.hpp).
#pragma once
#include <cstdint>

#include "kernels/operation_params.hpp"

namespace mgt::cpu {

// Megatron's int(kv_channels · rotary_percent).
int64_t rotary_dim_for(int64_t head_dim, double rotary_percent);

// y = rope(x) over a [seq, batch, heads, head_dim] (or batch-major) tensor; y may alias x.
void rotary_forward(const float* x, const HeadTensor& shape, const RotaryParams& params, float* y);

// dx = ropeᵀ(dy): the rotation by −θ. dx may alias dy.
void rotary_backward(const float* dy, const HeadTensor& shape, const RotaryParams& params,
                     float* dx);

}  // namespace mgt::cpu
