#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <vector>

#include "kernel_testing.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/gelu.hpp"
#include "kernels/cpu/swiglu.hpp"

using namespace mgt;
using namespace mgt::kernel_testing;

namespace {

double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(0.79788456 * x * (1.0 + 0.044715 * x * x)));
}
double silu(double a) { return a / (1.0 + std::exp(-a)); }

using Forward = void (*)(const float*, int64_t, float*);
using Backward = void (*)(const float*, const float*, int64_t, float*);

void check_elementwise(Forward forward, Backward backward, double (*reference)(double),
                       uint32_t seed) {
  const int64_t n = 257;
  const auto x = random_floats(n, seed, -5.0f, 5.0f);
  const auto dy = random_floats(n, seed + 1);
  std::vector<float> y(n), dx(n);
  forward(x.data(), n, y.data());
  backward(dy.data(), x.data(), n, dx.data());
  std::vector<double> want_y(n), want_dx(n);
  for (int64_t i = 0; i < n; ++i) {
    want_y[i] = reference(x[i]);
    const double h = 1e-6;
    want_dx[i] = dy[i] * (reference(x[i] + h) - reference(x[i] - h)) / (2 * h);
  }
  CHECK(rel_error(y, want_y) < 1e-6);
  CHECK(max_rel_error(y, want_y) < 1e-6);
  CHECK(rel_error(dx, want_dx) < 1e-5);
  CHECK(max_rel_error(dx, want_dx) < 1e-5);
}

}  // namespace

TEST_CASE("gelu (erf form) forward and backward", "[kernels]") {
  check_elementwise(cpu::gelu_forward, cpu::gelu_backward, gelu_erf, 61);
}

TEST_CASE("gelu (tanh form) forward and backward", "[kernels]") {
  check_elementwise(cpu::gelu_tanh_forward, cpu::gelu_tanh_backward, gelu_tanh, 63);
  // The two forms agree to within the approximation's known error.
  const auto x = random_floats(101, 65, -4.0f, 4.0f);
  std::vector<float> a(x.size()), b(x.size());
  cpu::gelu_forward(x.data(), 101, a.data());
  cpu::gelu_tanh_forward(x.data(), 101, b.data());
  for (size_t i = 0; i < x.size(); ++i) CHECK(std::abs(a[i] - b[i]) < 1e-3);
}

TEST_CASE("swiglu forward and backward", "[kernels]") {
  const int64_t rows = 4, ffn = 6;
  const auto x = random_floats(rows * 2 * ffn, 71, -4.0f, 4.0f);
  const auto dy = random_floats(rows * ffn, 72);
  const auto xd = to_double(x), dyd = to_double(dy);
  const auto reference = [&](const std::vector<double>& in) {
    std::vector<double> out(rows * ffn);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < ffn; ++i) {
        out[r * ffn + i] = silu(in[r * 2 * ffn + i]) * in[r * 2 * ffn + ffn + i];
      }
    }
    return out;
  };
  std::vector<float> y(rows * ffn), dx(x.size());
  cpu::swiglu_forward(x.data(), rows, ffn, y.data());
  cpu::swiglu_backward(dy.data(), x.data(), rows, ffn, dx.data());
  CHECK(rel_error(y, reference(xd)) < 1e-6);
  const auto want_dx =
      numeric_gradient([&](const std::vector<double>& v) { return dot(reference(v), dyd); }, xd);
  CHECK(rel_error(dx, want_dx) < 1e-5);
  CHECK(max_rel_error(dx, want_dx) < 1e-5);
}

TEST_CASE("bias, residual add, accumulate and scale", "[kernels]") {
  const int64_t rows = 3, cols = 5;
  auto y = random_floats(rows * cols, 81);
  const auto y0 = y;
  const auto bias = random_floats(cols, 82);
  cpu::add_bias(y.data(), bias.data(), rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) CHECK(y[r * cols + c] == y0[r * cols + c] + bias[c]);
  }
  const auto other = random_floats(rows * cols, 83);
  std::vector<float> sum(y.size());
  cpu::add(y0.data(), other.data(), nullptr, rows * cols, sum.data());
  auto acc = y0;
  cpu::accumulate(acc.data(), other.data(), rows * cols);
  CHECK(acc == sum);
  cpu::add(acc.data(), other.data(), nullptr, rows * cols, acc.data());  // aliasing the output
  cpu::scale(acc.data(), rows * cols, 0.5f);
  for (size_t i = 0; i < acc.size(); ++i) CHECK(acc[i] == (sum[i] + other[i]) * 0.5f);
  // A third addend, in the order (a + b) + c.
  std::vector<float> three(y.size());
  cpu::add(y0.data(), other.data(), bias.data(), cols, three.data());
  for (int64_t c = 0; c < cols; ++c) CHECK(three[c] == (y0[c] + other[c]) + bias[c]);
}
