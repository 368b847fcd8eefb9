#include "kernels/cpu/swiglu.hpp"

#include <cmath>

#include "kernels/cpu/require.hpp"

namespace mgt::cpu {
namespace {

float sigmoid(float a) { return 1.0f / (1.0f + std::exp(-a)); }

}  // namespace

void swiglu_forward(const float* x, int64_t rows, int64_t ffn, float* y) {
  require_nonnegative(rows, "swiglu_forward", "rows");
  require_nonnegative(ffn, "swiglu_forward", "ffn");
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = x + r * 2 * ffn;
    const float* up = gate + ffn;
    float* yr = y + r * ffn;
    for (int64_t i = 0; i < ffn; ++i) yr[i] = gate[i] * sigmoid(gate[i]) * up[i];
  }
}

void swiglu_backward(const float* dy, const float* x, int64_t rows, int64_t ffn, float* dx) {
  require_nonnegative(rows, "swiglu_backward", "rows");
  require_nonnegative(ffn, "swiglu_backward", "ffn");
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = x + r * 2 * ffn;
    const float* up = gate + ffn;
    const float* dyr = dy + r * ffn;
    float* dgate = dx + r * 2 * ffn;
    float* dup = dgate + ffn;
    for (int64_t i = 0; i < ffn; ++i) {
      const float a = gate[i];
      const float s = sigmoid(a);
      // silu'(a) = σ(a)·(1 + a·(1 − σ(a))).
      dgate[i] = dyr[i] * up[i] * s * (1.0f + a * (1.0f - s));
      dup[i] = dyr[i] * a * s;
    }
  }
}

}  // namespace mgt::cpu
