#include "kernels/cpu/adamw.hpp"

#include <cmath>

#include "kernels/cpu/require.hpp"

namespace mgt::cpu {

void adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                const AdamWParams& params, int64_t step) {
  require_nonnegative(n, "adamw_step", "n");
  require(step >= 1, "adamw_step", "step must be >= 1");
  require(params.beta1 >= 0.0f && params.beta1 < 1.0f, "adamw_step", "beta1 must be in [0, 1)");
  require(params.beta2 >= 0.0f && params.beta2 < 1.0f, "adamw_step", "beta2 must be in [0, 1)");
  const auto t = static_cast<double>(step);
  const auto correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(params.beta1), t));
  const auto correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(params.beta2), t));
  const float b1 = params.beta1;
  const float b2 = params.beta2;
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float m = b1 * exp_avg[i] + (1.0f - b1) * g;
    const float v = b2 * exp_avg_sq[i] + (1.0f - b2) * g * g;
    const float m_hat = m / correction1;
    const float v_hat = v / correction2;
    const float update = m_hat / (std::sqrt(v_hat) + params.eps) + params.weight_decay * param[i];
    param[i] -= params.lr * update;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

}  // namespace mgt::cpu
