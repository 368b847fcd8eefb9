// One AdamW step with Megatron's semantics (--optimizer adam runs Apex/TE FusedAdam in AdamW
// mode, adam_w_mode=True, bias correction on). For step t >= 1 and each element:
//   m = β1·m + (1 − β1)·g
//   v = β2·v + (1 − β2)·g²
//   m̂ = m / (1 − β1^t),  v̂ = v / (1 − β2^t)
//   p = p − lr·( m̂ / (√v̂ + eps) + wd·p )
// eps is added after the square root of the bias-corrected v, and the weight decay is decoupled
// (lr·wd·p, computed from p before the update) — identical, up to rounding, to
// torch.optim.AdamW's p·(1 − lr·wd) followed by p − (lr/(1 − β1^t))·m / (√v/√(1 − β2^t) + eps).
// Megatron's per-parameter wd_mult / lr_mult are folded into lr and weight_decay by the caller.
#pragma once
#include <cstdint>

#include "kernels/operation_params.hpp"

namespace mgt::cpu {

// param, exp_avg, exp_avg_sq: [n], updated in place; grad: [n]; step: 1 for the first update.
void adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                const AdamWParams& params, int64_t step);

}  // namespace mgt::cpu
