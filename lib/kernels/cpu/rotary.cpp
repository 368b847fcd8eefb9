#include "kernels/cpu/rotary.hpp"

#include <cmath>
#include <vector>

#include "kernels/cpu/require.hpp"

namespace mgt::cpu {
namespace {

// Rotates every head by angle sign·θ; the backward is the same map with sign = −1 because a
// rotation's transpose is its inverse.
void rotate(const float* x, const HeadTensor& shape, const RotaryParams& params, float sign,
            float* y, const char* name) {
  require(shape.seq >= 0 && shape.batch >= 0 && shape.heads >= 0, name, "sizes must be >= 0");
  require(shape.head_dim > 0, name, "head_dim must be > 0");
  require(params.rotary_dim > 0 && params.rotary_dim <= shape.head_dim, name,
          "rotary_dim must be in (0, head_dim]");
  require(params.rotary_dim % 2 == 0, name, "rotary_dim must be even");
  require(params.base > 0.0, name, "base must be > 0");
  require(params.llama3_scaling_factor >= 0.0, name, "llama3_scaling_factor must be >= 0");

  const int64_t half = params.rotary_dim / 2;
  // Angles in double: positions reach thousands, and fp32 θ would lose several digits there.
  std::vector<float> cos_table(static_cast<size_t>(shape.seq * half));
  std::vector<float> sin_table(cos_table.size());
  for (int64_t s = 0; s < shape.seq; ++s) {
    const double pos = static_cast<double>(params.position_offset + s);
    for (int64_t i = 0; i < half; ++i) {
      const double exponent =
          -static_cast<double>(2 * i) / static_cast<double>(params.rotary_dim);
      const double inv_freq = llama3_scaled_inv_freq(std::pow(params.base, exponent), params.llama3_scaling_factor);
      const double theta = pos * inv_freq;
      cos_table[static_cast<size_t>(s * half + i)] = static_cast<float>(std::cos(theta));
      sin_table[static_cast<size_t>(s * half + i)] = static_cast<float>(sign * std::sin(theta));
    }
  }

  for (int64_t s = 0; s < shape.seq; ++s) {
    const float* c = cos_table.data() + s * half;
    const float* sn = sin_table.data() + s * half;
    for (int64_t b = 0; b < shape.batch; ++b) {
      for (int64_t h = 0; h < shape.heads; ++h) {
        const int64_t base_offset = shape.offset(s, b, h);
        const float* xh = x + base_offset;
        float* yh = y + base_offset;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = xh[i];
          const float x2 = xh[i + half];
          yh[i] = x1 * c[i] - x2 * sn[i];
          yh[i + half] = x2 * c[i] + x1 * sn[i];
        }
        if (yh != xh) {
          for (int64_t i = params.rotary_dim; i < shape.head_dim; ++i) yh[i] = xh[i];
        }
      }
    }
  }
}

}  // namespace

int64_t rotary_dim_for(int64_t head_dim, double rotary_percent) {
  return static_cast<int64_t>(static_cast<double>(head_dim) * rotary_percent);
}

void rotary_forward(const float* x, const HeadTensor& shape, const RotaryParams& params, float* y) {
  rotate(x, shape, params, 1.0f, y, "rotary_forward");
}

void rotary_backward(const float* dy, const HeadTensor& shape, const RotaryParams& params,
                     float* dx) {
  rotate(dy, shape, params, -1.0f, dx, "rotary_backward");
}

}  // namespace mgt::cpu
