#include "kernels/grad_clip.hpp"

namespace mgt {

double clip_coefficient(double total_norm, double max_norm) {
  if (max_norm <= 0.0) return 1.0;
  const double coefficient = max_norm / (total_norm + 1.0e-6);
  return coefficient < 1.0 ? coefficient : 1.0;
}

}  // namespace mgt
