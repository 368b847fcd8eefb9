// Single-precision matrix product on row-major storage, the one place the CPU backend calls BLAS.
#pragma once
#include <cstdint>

namespace mgt::cpu {

enum class Trans { kNo, kYes };

// While alive, BLAS runs every GEMM on its calling thread: for work that the backend's own pool
// already spreads over the cores (one attention head per thread), where BLAS's threads would
// only contend. Restores the previous thread count when destroyed. Not for nesting across
// threads: make one on the thread that starts the parallel work.
class SingleThreadedBlas {
public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

private:
  int previous_;
};

// C[m, n] = alpha · op(A) · op(B) + beta · C, where op(A) is [m, k] and op(B) is [k, n].
// lda/ldb/ldc are row strides in elements of the matrices as stored (A is [m, k] or, transposed,
// [k, m]); strided views let attention address one head inside a [tokens, heads, dim] tensor.
// With beta == 0, C is not read (it may hold garbage).
void gemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc);

// Same on densely packed matrices.
void gemm(Trans trans_a, Trans trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, const float* b, float beta, float* c);

}  // namespace mgt::cpu
