#include "kernels/cpu/fp8.hpp"

#include <cmath>
#include <limits>

namespace mgt::cpu {

float absolute_max(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (std::isnan(a)) return std::numeric_limits<float>::quiet_NaN();
    if (a > m) m = a;
  }
  return m;
}

void fp8_cast(const float* x, int64_t rows, int64_t cols, float scale, Fp8Format format, uint8_t* rowwise,
              uint8_t* transposed) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const uint8_t code = fp8_encode(x[r * cols + c] * scale, format);
      if (rowwise) rowwise[r * cols + c] = code;
      if (transposed) transposed[c * rows + r] = code;
    }
  }
}

void fp8_dequantize(const uint8_t* codes, int64_t n, Fp8Format format, float scale_inv, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = fp8_decode(codes[i], format) * scale_inv;
}

}  // namespace mgt::cpu
