#include "kernels/cpu/gemm.hpp"

#include <cblas.h>

#include <algorithm>
#include <climits>

#include "kernels/cpu/require.hpp"

namespace mgt::cpu {
namespace {

constexpr const char* kName = "gemm";

// BLAS takes 32-bit sizes; refuse anything larger instead of truncating silently.
blasint narrow(int64_t value, const char* what) {
  require(value >= 0 && value <= INT_MAX, kName, what);
  return static_cast<blasint>(value);
}

}  // namespace

SingleThreadedBlas::SingleThreadedBlas() : previous_(openblas_get_num_threads()) {
  if (previous_ != 1) openblas_set_num_threads(1);
}

SingleThreadedBlas::~SingleThreadedBlas() {
  if (previous_ != 1) openblas_set_num_threads(previous_);
}

void gemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc) {
  require(m >= 0 && n >= 0 && k >= 0, kName, "sizes must be >= 0");
  const int64_t a_cols = trans_a == Trans::kNo ? k : m;
  const int64_t b_cols = trans_b == Trans::kNo ? n : k;
  require(lda >= std::max<int64_t>(1, a_cols), kName, "lda smaller than the row length of A");
  require(ldb >= std::max<int64_t>(1, b_cols), kName, "ldb smaller than the row length of B");
  require(ldc >= std::max<int64_t>(1, n), kName, "ldc smaller than the row length of C");
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == 0.0f) {
    // No product to add; handle here so BLAS never sees a degenerate inner size.
    for (int64_t i = 0; i < m; ++i) {
      float* row = c + i * ldc;
      for (int64_t j = 0; j < n; ++j) row[j] = beta == 0.0f ? 0.0f : beta * row[j];
    }
    return;
  }
  if (m == 1) {
    // One row (a token being generated): a matrix-vector product, which BLAS runs as a
    // bandwidth-bound GEMV instead of packing B for a GEMM. c = op(B)ᵀ·a with op(B) [k, n].
    const blasint incx = trans_a == Trans::kNo ? 1 : narrow(lda, "lda too large");
    if (trans_b == Trans::kYes) {  // B is [n, k]
      cblas_sgemv(CblasRowMajor, CblasNoTrans, narrow(n, "n too large"), narrow(k, "k too large"), alpha, b,
                  narrow(ldb, "ldb too large"), a, incx, beta, c, 1);
    } else {  // B is [k, n]
      cblas_sgemv(CblasRowMajor, CblasTrans, narrow(k, "k too large"), narrow(n, "n too large"), alpha, b,
                  narrow(ldb, "ldb too large"), a, incx, beta, c, 1);
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a == Trans::kNo ? CblasNoTrans : CblasTrans,
              trans_b == Trans::kNo ? CblasNoTrans : CblasTrans, narrow(m, "m too large"),
              narrow(n, "n too large"), narrow(k, "k too large"), alpha, a,
              narrow(lda, "lda too large"), b, narrow(ldb, "ldb too large"), beta, c,
              narrow(ldc, "ldc too large"));
}

void gemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, const float* b, float beta, float* c) {
  const int64_t lda = trans_a == Trans::kNo ? k : m;
  const int64_t ldb = trans_b == Trans::kNo ? n : k;
  gemm(trans_a, trans_b, m, n, k, alpha, a, std::max<int64_t>(1, lda), b,
       std::max<int64_t>(1, ldb), beta, c, std::max<int64_t>(1, n));
}

}  // namespace mgt::cpu
