#include "kernels/cpu/squared_relu.hpp"

#include "kernels/cpu/require.hpp"

namespace mgt::cpu {

void squared_relu_forward(const float* x, int64_t n, float* y) {
  require_nonnegative(n, "squared_relu_forward", "n");
  for (int64_t i = 0; i < n; ++i) {
    const float r = x[i] > 0.0f ? x[i] : 0.0f;
    y[i] = r * r;
  }
}

void squared_relu_backward(const float* dy, const float* x, int64_t n, float* dx) {
  require_nonnegative(n, "squared_relu_backward", "n");
  for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.0f ? dy[i] * (2.0f * x[i]) : 0.0f;
}

}  // namespace mgt::cpu
