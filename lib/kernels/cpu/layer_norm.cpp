#include "kernels/cpu/layer_norm.hpp"

#include <cmath>

#include "kernels/cpu/require.hpp"

namespace mgt::cpu {
namespace {

void check(int64_t rows, int64_t hidden, float eps, const char* name) {
  require_nonnegative(rows, name, "rows");
  require(hidden > 0, name, "hidden must be > 0");
  require(eps >= 0.0f, name, "eps must be >= 0");
}

}  // namespace

void layer_norm_forward(const float* x, const float* weight, const float* bias, int64_t rows,
                        int64_t hidden, float eps, float* y, float* mean, float* rstd) {
  check(rows, hidden, eps, "layer_norm_forward");
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * hidden;
    float* yr = y + r * hidden;
    // Two passes in double: the one-pass E[x²] − E[x]² form cancels badly when |mean| ≫ std.
    double sum = 0.0;
    for (int64_t i = 0; i < hidden; ++i) sum += xr[i];
    const double mu = sum / static_cast<double>(hidden);
    double sq = 0.0;
    for (int64_t i = 0; i < hidden; ++i) {
      const double d = xr[i] - mu;
      sq += d * d;
    }
    const double inv = 1.0 / std::sqrt(sq / static_cast<double>(hidden) + eps);
    // Centring in double as well: rounding the mean to fp32 first would cost the output as many
    // digits as |mean| / std.
    for (int64_t i = 0; i < hidden; ++i) {
      const auto normed = static_cast<float>((xr[i] - mu) * inv);
      yr[i] = normed * weight[i] + (bias != nullptr ? bias[i] : 0.0f);
    }
    mean[r] = static_cast<float>(mu);
    rstd[r] = static_cast<float>(inv);
  }
}

void layer_norm_backward(const float* dy, const float* x, const float* weight, const float* mean,
                         const float* rstd, int64_t rows, int64_t hidden, float* dx,
                         float* dweight, float* dbias, bool accumulate_dx) {
  check(rows, hidden, 0.0f, "layer_norm_backward");
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * hidden;
    const float* dyr = dy + r * hidden;
    float* dxr = dx + r * hidden;
    const float mu = mean[r];
    const float inv = rstd[r];
    double sum_g = 0.0;
    double sum_g_xhat = 0.0;
    for (int64_t i = 0; i < hidden; ++i) {
      const float xhat = (xr[i] - mu) * inv;
      const float g = dyr[i] * weight[i];
      sum_g += g;
      sum_g_xhat += static_cast<double>(g) * xhat;
      dweight[i] += dyr[i] * xhat;
      if (dbias != nullptr) dbias[i] += dyr[i];
    }
    const float mean_g = static_cast<float>(sum_g / static_cast<double>(hidden));
    const float mean_g_xhat = static_cast<float>(sum_g_xhat / static_cast<double>(hidden));
    for (int64_t i = 0; i < hidden; ++i) {
      const float xhat = (xr[i] - mu) * inv;
      const float g = inv * (dyr[i] * weight[i] - mean_g - xhat * mean_g_xhat);
      dxr[i] = accumulate_dx ? dxr[i] + g : g;
    }
  }
}

}  // namespace mgt::cpu
