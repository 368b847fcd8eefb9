#include <catch2/catch.hpp>

#include <limits>
#include <vector>

#include "core/error.hpp"
#include "kernel_testing.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/linear.hpp"

using namespace mgt;
using namespace mgt::kernel_testing;
using cpu::Trans;

namespace {

// C = alpha·op(A)·op(B) + beta·C in fp64, with explicit row strides.
std::vector<double> reference_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                                   const std::vector<float>& a, int64_t lda,
                                   const std::vector<float>& b, int64_t ldb, double beta,
                                   const std::vector<float>& c, int64_t ldc) {
  std::vector<double> out(c.begin(), c.end());
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = ta ? a[p * lda + i] : a[i * lda + p];
        const double bv = tb ? b[j * ldb + p] : b[p * ldb + j];
        sum += av * bv;
      }
      out[i * ldc + j] = alpha * sum + beta * c[i * ldc + j];
    }
  }
  return out;
}

}  // namespace

TEST_CASE("gemm matches an fp64 product for every transpose combination", "[kernels]") {
  const int64_t n = 5, k = 9;
  uint32_t seed = 1;
  for (const int64_t m : {7, 1})  // one row takes the matrix-vector path
  for (const bool ta : {false, true}) {
    for (const bool tb : {false, true}) {
      // Padded leading dimensions exercise the strided path used by attention.
      const int64_t lda = (ta ? m : k) + 3;
      const int64_t ldb = (tb ? k : n) + 2;
      const int64_t ldc = n + 4;
      const auto a = random_floats(static_cast<size_t>((ta ? k : m) * lda), seed++);
      const auto b = random_floats(static_cast<size_t>((tb ? n : k) * ldb), seed++);
      auto c = random_floats(static_cast<size_t>(m * ldc), seed++);
      const auto want = reference_gemm(ta, tb, m, n, k, 0.75, a, lda, b, ldb, -0.5, c, ldc);
      cpu::gemm(ta ? Trans::kYes : Trans::kNo, tb ? Trans::kYes : Trans::kNo, m, n, k, 0.75f,
                a.data(), lda, b.data(), ldb, -0.5f, c.data(), ldc);
      INFO("m=" << m << " trans_a=" << ta << " trans_b=" << tb);
      CHECK(rel_error(c, want) < 1e-6);
      CHECK(max_rel_error(c, want) < 1e-6);
    }
  }
}

TEST_CASE("gemm with beta 0 ignores what C held", "[kernels]") {
  const int64_t m = 4, n = 6, k = 3;
  const auto a = random_floats(static_cast<size_t>(m * k), 11);
  const auto b = random_floats(static_cast<size_t>(k * n), 12);
  std::vector<float> c(static_cast<size_t>(m * n), std::numeric_limits<float>::quiet_NaN());
  const std::vector<float> zeros(c.size(), 0.0f);
  const auto want = reference_gemm(false, false, m, n, k, 1.0, a, k, b, n, 0.0, zeros, n);
  cpu::gemm(Trans::kNo, Trans::kNo, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data());
  CHECK(rel_error(c, want) < 1e-6);

  // An empty inner dimension leaves beta·C.
  std::vector<float> d = random_floats(static_cast<size_t>(m * n), 13);
  const std::vector<float> d0 = d;
  cpu::gemm(Trans::kNo, Trans::kNo, m, n, 0, 1.0f, a.data(), b.data(), 2.0f, d.data());
  for (size_t i = 0; i < d.size(); ++i) CHECK(d[i] == 2.0f * d0[i]);
}

TEST_CASE("gemm refuses leading dimensions shorter than a row", "[kernels]") {
  std::vector<float> a(16), b(16), c(16);
  CHECK_THROWS_AS(cpu::gemm(Trans::kNo, Trans::kNo, 2, 2, 4, 1.0f, a.data(), 3, b.data(), 2, 0.0f,
                            c.data(), 2),
                  Error);
  CHECK_THROWS_AS(cpu::gemm(Trans::kNo, Trans::kNo, -1, 2, 2, 1.0f, a.data(), b.data(), 0.0f,
                            c.data()),
                  Error);
}

TEST_CASE("linear forward and backward match fp64 references", "[kernels]") {
  const int64_t rows = 6, in = 5, out = 4;
  const auto x = random_floats(static_cast<size_t>(rows * in), 21);
  const auto w = random_floats(static_cast<size_t>(out * in), 22);
  const auto bias = random_floats(static_cast<size_t>(out), 23);
  const auto dy = random_floats(static_cast<size_t>(rows * out), 24);

  std::vector<double> want_y(static_cast<size_t>(rows * out));
  std::vector<double> want_dx(static_cast<size_t>(rows * in), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double s = bias[o];
      for (int64_t i = 0; i < in; ++i) s += static_cast<double>(x[r * in + i]) * w[o * in + i];
      want_y[r * out + o] = s;
      for (int64_t i = 0; i < in; ++i) {
        want_dx[r * in + i] += static_cast<double>(dy[r * out + o]) * w[o * in + i];
      }
    }
  }

  std::vector<float> y(want_y.size());
  cpu::linear_forward(x.data(), w.data(), bias.data(), rows, in, out, y.data());
  CHECK(rel_error(y, want_y) < 1e-6);

  std::vector<float> y_nobias(want_y.size());
  cpu::linear_forward(x.data(), w.data(), nullptr, rows, in, out, y_nobias.data());
  for (size_t i = 0; i < y.size(); ++i) {
    CHECK(y_nobias[i] == Approx(y[i] - bias[i % static_cast<size_t>(out)]).margin(1e-6));
  }

  std::vector<float> dx(want_dx.size());
  cpu::linear_backward_input(dy.data(), w.data(), rows, in, out, dx.data());
  CHECK(rel_error(dx, want_dx) < 1e-6);

  // Weight and bias gradients accumulate onto what the buffers held.
  auto dw = random_floats(static_cast<size_t>(out * in), 25);
  auto db = random_floats(static_cast<size_t>(out), 26);
  std::vector<double> want_dw = to_double(dw);
  std::vector<double> want_db = to_double(db);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      want_db[o] += dy[r * out + o];
      for (int64_t i = 0; i < in; ++i) {
        want_dw[o * in + i] += static_cast<double>(dy[r * out + o]) * x[r * in + i];
      }
    }
  }
  cpu::linear_backward_weight(dy.data(), x.data(), rows, in, out, dw.data());
  cpu::bias_backward(dy.data(), rows, out, db.data());
  CHECK(rel_error(dw, want_dw) < 1e-6);
  CHECK(rel_error(db, want_db) < 1e-6);
}
