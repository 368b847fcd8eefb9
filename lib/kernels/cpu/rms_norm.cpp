#include "kernels/cpu/rms_norm.hpp"

#include <cmath>

#include "kernels/cpu/require.hpp"

namespace mgt::cpu {

void rms_norm_forward(const float* x, const float* weight, int64_t rows, int64_t hidden, float eps,
                      float* y, float* rstd) {
  require_nonnegative(rows, "rms_norm_forward", "rows");
  require(hidden > 0, "rms_norm_forward", "hidden must be > 0");
  require(eps >= 0.0f, "rms_norm_forward", "eps must be >= 0");
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * hidden;
    float* yr = y + r * hidden;
    double sq = 0.0;
    for (int64_t i = 0; i < hidden; ++i) sq += static_cast<double>(xr[i]) * xr[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(hidden) + eps));
    for (int64_t i = 0; i < hidden; ++i) yr[i] = xr[i] * inv * weight[i];
    rstd[r] = inv;
  }
}

void rms_norm_backward(const float* dy, const float* x, const float* weight, const float* rstd,
                       int64_t rows, int64_t hidden, float* dx, float* dweight, bool accumulate_dx) {
  require_nonnegative(rows, "rms_norm_backward", "rows");
  require(hidden > 0, "rms_norm_backward", "hidden must be > 0");
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * hidden;
    const float* dyr = dy + r * hidden;
    float* dxr = dx + r * hidden;
    const float inv = rstd[r];
    double sum_g_xhat = 0.0;
    for (int64_t i = 0; i < hidden; ++i) {
      const float xhat = xr[i] * inv;
      sum_g_xhat += static_cast<double>(dyr[i]) * weight[i] * xhat;
      dweight[i] += dyr[i] * xhat;
    }
    const float mean_g_xhat = static_cast<float>(sum_g_xhat / static_cast<double>(hidden));
    for (int64_t i = 0; i < hidden; ++i) {
      const float g = inv * (dyr[i] * weight[i] - xr[i] * inv * mean_g_xhat);
      dxr[i] = accumulate_dx ? dxr[i] + g : g;
    }
  }
}

}  // namespace mgt::cpu
