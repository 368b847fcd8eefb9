// RMSNorm over the last dimension (--normalization RMSNorm): y = x · rstd · weight with
// rstd = 1/sqrt(mean(x²) + eps); no centring and no bias.
#pragma once
#include <cstdint>

namespace mgt::cpu {

// x, y: [rows, hidden]; weight: [hidden]; rstd: [rows], saved for the backward.
void rms_norm_forward(const float* x, const float* weight, int64_t rows, int64_t hidden, float eps,
                      float* y, float* rstd);

// dx = rstd · (g − x̂ · mean(g · x̂)) with g = dy · weight, x̂ = x · rstd; dx overwritten (or
// added to, with accumulate_dx), dweight += Σ_rows dy · x̂ accumulates.
void rms_norm_backward(const float* dy, const float* x, const float* weight, const float* rstd,
                       int64_t rows, int64_t hidden, float* dx, float* dweight, bool accumulate_dx = false);

}  // namespace mgt::cpu
