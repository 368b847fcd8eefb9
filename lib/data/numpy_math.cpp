#include "data/numpy_math.hpp"

#include <cstddef>

namespace mgt {

namespace {

double pairwise_sum(const double* a, std::size_t n) {
  if (n < 8) {
    double res = 0.0;
    for (std::size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    std::size_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  std::size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

}  // namespace

double numpy_sum(std::span<const double> values) {
  return 0.0 + pairwise_sum(values.data(), values.size());
}

std::vector<double> numpy_normalize(std::span<const double> values) {
  double total = numpy_sum(values);
  std::vector<double> out;
  out.reserve(values.size());
  for (double v : values) out.push_back(v / total);
  return out;
}

}  // namespace mgt
