#include "kernels/cpu/grad_clip.hpp"

#include <cmath>

namespace mgt::cpu {

double sum_of_squares(std::span<const std::span<const float>> buffers) {
  double total = 0.0;
  for (const std::span<const float> buffer : buffers) {
    for (const float x : buffer) total += static_cast<double>(x) * x;
  }
  return total;
}

double global_l2_norm(std::span<const std::span<const float>> buffers) {
  return std::sqrt(sum_of_squares(buffers));
}

void scale_buffers(std::span<const std::span<float>> buffers, float coefficient) {
  for (const std::span<float> buffer : buffers) {
    for (float& x : buffer) x *= coefficient;
  }
}

}  // namespace mgt::cpu
