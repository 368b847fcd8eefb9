// Helpers for the kernel tests: reproducible random inputs, fp64 comparisons, and central finite
// differences of fp64 reference implementations.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace mgt::kernel_testing {

// Uniform floats in [lo, hi) from a fixed seed. Built from raw mt19937 words rather than
// std::uniform_real_distribution, whose output differs between standard libraries.
inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::vector<float> out(n);
  for (float& x : out) {
    const double u = static_cast<double>(gen() >> 8) / 16777216.0;
    x = static_cast<float>(lo + (hi - lo) * u);
  }
  return out;
}

inline std::vector<double> to_double(const std::vector<float>& x) {
  return std::vector<double>(x.begin(), x.end());
}

// ‖got − want‖₂ / ‖want‖₂ (absolute when want is zero).
template <typename Got>
double rel_error(const Got& got, const std::vector<double>& want) {
  double diff = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    diff += d * d;
    norm += want[i] * want[i];
  }
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// Largest |got − want| relative to the largest |want|: catches a single wrong element that an
// L2 ratio over many elements could hide.
template <typename Got>
double max_rel_error(const Got& got, const std::vector<double>& want) {
  double diff = 0.0;
  double scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return scale > 0.0 ? diff / scale : diff;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Gradient of the scalar loss(x) by central differences; loss is an fp64 reference.
template <typename Loss>
std::vector<double> numeric_gradient(Loss loss, std::vector<double> x, double step = 1e-6) {
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + step;
    const double up = loss(x);
    x[i] = saved - step;
    const double down = loss(x);
    x[i] = saved;
    grad[i] = (up - down) / (2.0 * step);
  }
  return grad;
}

}  // namespace mgt::kernel_testing
