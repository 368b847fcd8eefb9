#include "kernels/cpu/elementwise.hpp"

#include "kernels/cpu/require.hpp"

namespace mgt::cpu {

void add_bias(float* y, const float* bias, int64_t rows, int64_t cols) {
  require_nonnegative(rows, "add_bias", "rows");
  require_nonnegative(cols, "add_bias", "cols");
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) row[c] += bias[c];
  }
}

void add(const float* a, const float* b, const float* c, int64_t n, float* out) {
  require_nonnegative(n, "add", "n");
  if (c == nullptr) {
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i] + c[i];
  }
}

void accumulate(float* y, const float* x, int64_t n) {
  require_nonnegative(n, "accumulate", "n");
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void scale(float* x, int64_t n, float factor) {
  require_nonnegative(n, "scale", "n");
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

}  // namespace mgt::cpu
