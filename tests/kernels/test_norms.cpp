#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "kernel_testing.hpp"
#include "kernels/cpu/layer_norm.hpp"
#include "kernels/cpu/rms_norm.hpp"

using namespace mgt;
using namespace mgt::kernel_testing;

namespace {

constexpr int64_t kRows = 5;
constexpr int64_t kHidden = 12;
constexpr double kEps = 1e-5;

std::vector<double> reference_layer_norm(const std::vector<double>& x, const std::vector<double>& w,
                                         const std::vector<double>& b) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < kRows; ++r) {
    double mean = 0.0;
    for (int64_t i = 0; i < kHidden; ++i) mean += x[r * kHidden + i];
    mean /= kHidden;
    double var = 0.0;
    for (int64_t i = 0; i < kHidden; ++i) var += std::pow(x[r * kHidden + i] - mean, 2);
    var /= kHidden;
    for (int64_t i = 0; i < kHidden; ++i) {
      y[r * kHidden + i] = (x[r * kHidden + i] - mean) / std::sqrt(var + kEps) * w[i] + b[i];
    }
  }
  return y;
}

std::vector<double> reference_rms_norm(const std::vector<double>& x, const std::vector<double>& w) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < kRows; ++r) {
    double sq = 0.0;
    for (int64_t i = 0; i < kHidden; ++i) sq += x[r * kHidden + i] * x[r * kHidden + i];
    const double inv = 1.0 / std::sqrt(sq / kHidden + kEps);
    for (int64_t i = 0; i < kHidden; ++i) y[r * kHidden + i] = x[r * kHidden + i] * inv * w[i];
  }
  return y;
}

std::vector<double> plus(std::vector<double> a, const std::vector<double>& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

}  // namespace

TEST_CASE("layer_norm forward matches fp64, also far from zero mean", "[kernels]") {
  for (const float shift : {0.0f, 300.0f}) {
    auto x = random_floats(kRows * kHidden, 31, -2.0f, 2.0f);
    for (float& v : x) v += shift;
    const auto w = random_floats(kHidden, 32, 0.5f, 1.5f);
    const auto b = random_floats(kHidden, 33);
    const auto want = reference_layer_norm(to_double(x), to_double(w), to_double(b));
    std::vector<float> y(x.size()), mean(kRows), rstd(kRows);
    cpu::layer_norm_forward(x.data(), w.data(), b.data(), kRows, kHidden, static_cast<float>(kEps),
                            y.data(), mean.data(), rstd.data());
    INFO("shift " << shift);
    CHECK(rel_error(y, want) < 2e-6);
    CHECK(max_rel_error(y, want) < 2e-6);
  }
}

TEST_CASE("layer_norm backward matches finite differences", "[kernels]") {
  const auto x = random_floats(kRows * kHidden, 41, -2.0f, 2.0f);
  const auto w = random_floats(kHidden, 42, 0.5f, 1.5f);
  const auto b = random_floats(kHidden, 43);
  const auto dy = random_floats(kRows * kHidden, 44);
  const auto xd = to_double(x), wd = to_double(w), bd = to_double(b), dyd = to_double(dy);

  std::vector<float> y(x.size()), mean(kRows), rstd(kRows);
  cpu::layer_norm_forward(x.data(), w.data(), b.data(), kRows, kHidden, static_cast<float>(kEps),
                          y.data(), mean.data(), rstd.data());
  std::vector<float> dx(x.size());
  auto dw = random_floats(kHidden, 45);  // accumulation onto existing gradients
  auto db = random_floats(kHidden, 46);
  const auto dw0 = to_double(dw), db0 = to_double(db);
  cpu::layer_norm_backward(dy.data(), x.data(), w.data(), mean.data(), rstd.data(), kRows, kHidden,
                           dx.data(), dw.data(), db.data());

  const auto want_dx = numeric_gradient(
      [&](const std::vector<double>& v) { return dot(reference_layer_norm(v, wd, bd), dyd); }, xd);
  const auto want_dw = numeric_gradient(
      [&](const std::vector<double>& v) { return dot(reference_layer_norm(xd, v, bd), dyd); }, wd);
  const auto want_db = numeric_gradient(
      [&](const std::vector<double>& v) { return dot(reference_layer_norm(xd, wd, v), dyd); }, bd);
  CHECK(rel_error(dx, want_dx) < 1e-5);
  CHECK(rel_error(dw, plus(want_dw, dw0)) < 1e-5);
  CHECK(rel_error(db, plus(want_db, db0)) < 1e-5);

  // A null bias gradient is allowed (bias-free norms) and leaves dx unchanged.
  std::vector<float> dx2(x.size()), dw2(kHidden, 0.0f);
  cpu::layer_norm_backward(dy.data(), x.data(), w.data(), mean.data(), rstd.data(), kRows, kHidden,
                           dx2.data(), dw2.data(), nullptr);
  CHECK(dx2 == dx);
}

TEST_CASE("rms_norm forward and backward match fp64", "[kernels]") {
  const auto x = random_floats(kRows * kHidden, 51, -2.0f, 2.0f);
  const auto w = random_floats(kHidden, 52, 0.5f, 1.5f);
  const auto dy = random_floats(kRows * kHidden, 53);
  const auto xd = to_double(x), wd = to_double(w), dyd = to_double(dy);

  std::vector<float> y(x.size()), rstd(kRows);
  cpu::rms_norm_forward(x.data(), w.data(), kRows, kHidden, static_cast<float>(kEps), y.data(),
                        rstd.data());
  CHECK(rel_error(y, reference_rms_norm(xd, wd)) < 2e-6);

  std::vector<float> dx(x.size());
  auto dw = random_floats(kHidden, 54);
  const auto dw0 = to_double(dw);
  cpu::rms_norm_backward(dy.data(), x.data(), w.data(), rstd.data(), kRows, kHidden, dx.data(),
                         dw.data());
  const auto want_dx = numeric_gradient(
      [&](const std::vector<double>& v) { return dot(reference_rms_norm(v, wd), dyd); }, xd);
  const auto want_dw = numeric_gradient(
      [&](const std::vector<double>& v) { return dot(reference_rms_norm(xd, v), dyd); }, wd);
  CHECK(rel_error(dx, want_dx) < 1e-5);
  CHECK(rel_error(dw, plus(want_dw, dw0)) < 1e-5);
}
