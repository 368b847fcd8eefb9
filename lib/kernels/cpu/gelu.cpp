#include "kernels/cpu/gelu.hpp"

#include <cmath>

#include "kernels/cpu/require.hpp"

namespace mgt::cpu {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // 1/√(2π), the normal density at 0
constexpr float kTanhScale = 0.79788456f;
constexpr float kTanhCubic = 0.044715f;

}  // namespace

void gelu_forward(const float* x, int64_t n, float* y) {
  require_nonnegative(n, "gelu_forward", "n");
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::erf(v * kInvSqrt2));
  }
}

void gelu_backward(const float* dy, const float* x, int64_t n, float* dx) {
  require_nonnegative(n, "gelu_backward", "n");
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    // d/dx [x·Φ(x)] = Φ(x) + x·φ(x).
    const float cdf = 0.5f * (1.0f + std::erf(v * kInvSqrt2));
    const float pdf = kInvSqrt2Pi * std::exp(-0.5f * v * v);
    dx[i] = dy[i] * (cdf + v * pdf);
  }
}

void gelu_tanh_forward(const float* x, int64_t n, float* y) {
  require_nonnegative(n, "gelu_tanh_forward", "n");
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::tanh(kTanhScale * v * (1.0f + kTanhCubic * v * v)));
  }
}

void gelu_tanh_backward(const float* dy, const float* x, int64_t n, float* dx) {
  require_nonnegative(n, "gelu_tanh_backward", "n");
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = std::tanh(kTanhScale * v * (1.0f + kTanhCubic * v * v));
    const float du = kTanhScale * (1.0f + 3.0f * kTanhCubic * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}

}  // namespace mgt::cpu
