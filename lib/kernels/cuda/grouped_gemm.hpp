// The grouped linear layers (Backend::grouped_linear_*) on the GPU: one GEMM per group of rows,
// all in one cublasGemmGroupedBatchedEx call (cuBLAS 12.5 and later) instead of one launch each,
// as Megatron-Core's GroupedMLP runs a mixture's local experts (megatron/core/transformer/moe/
// experts.py). Row-major as kernels/cuda/gemm.hpp: y_g = x_g·W_gᵀ, dx_g = dy_g·W_g,
// dW_g += dy_gᵀ·x_g; groups without rows are left out of the call.
//
// cuBLAS's grouped GEMM takes A, B and C of one type: bf16 or fp16 with fp32 accumulation
// (CUBLAS_COMPUTE_32F), or fp32 (CUBLAS_COMPUTE_32F_PEDANTIC, the full fp32 arithmetic of the
// fp32 path). Where the operands are otherwise — a 2-byte run's weight gradient into its fp32
// main gradient, fp32 operands under --bf16 (which gemm.hpp rounds to bf16 with
// CUBLAS_COMPUTE_32F_FAST_16BF, a type the grouped GEMM does not take), 2-byte pointers that are
// not 16-byte aligned, or dimensions beyond int — the functions return false, nothing done, and
// the backend runs one GEMM per group instead (Backend's default hooks). They do the same where
// cuBLAS answers CUBLAS_STATUS_NOT_SUPPORTED, and then do not ask again for that combination.
//
// The matrices' addresses reach the device as a kernel's argument written into a buffer kept
// between calls (grown outside a recording only): no host staging whose lifetime would outlast
// the call, and a recorded graph keeps them by value. The buffer is rewritten by the next call
// only after this call's GEMM in stream order.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kernels/backend.hpp"

namespace mgt::cuda {

class GroupedGemm {
public:
  using MatmulPrecision = Backend::MatmulPrecision;

  GroupedGemm(Backend& backend, cublasHandle_t handle, cudaStream_t stream)
      : backend_(&backend), handle_(handle), stream_(stream) {}

  // Each returns whether it ran (bias: the caller adds it; see above for when it does not run).
  bool forward(ConstFloatView x, std::span<const ConstFloatView> w, std::span<const int64_t> group_rows, int64_t in,
               int64_t out, FloatView y, MatmulPrecision precision);
  bool backward_input(ConstFloatView dy, std::span<const ConstFloatView> w, std::span<const int64_t> group_rows,
                      int64_t in, int64_t out, FloatView dx, MatmulPrecision precision);
  bool backward_weight(ConstFloatView dy, ConstFloatView x, std::span<const int64_t> group_rows, int64_t in,
                       int64_t out, std::span<const FloatView> dw, MatmulPrecision precision);

private:
  // One column-major product C = A·B (op_a, op_b applied), with its sizes.
  struct Problem {
    const void* a;
    const void* b;
    void* c;
    int64_t m, n, k, lda, ldb, ldc;
  };
  // Runs the problems (none empty) as one grouped GEMM; false where it cannot (nothing done).
  bool run(cublasOperation_t op_a, cublasOperation_t op_b, const std::vector<Problem>& problems, FloatType ab,
           FloatType c, float beta, MatmulPrecision precision);

  Backend* backend_;
  cublasHandle_t handle_;
  cudaStream_t stream_;
  DeviceArray<const void*> pointers_;  // [A…, B…, C…] of the last call
  std::vector<std::pair<FloatType, cublasComputeType_t>> refused_;  // cuBLAS's NOT_SUPPORTED answers
};

}  // namespace mgt::cuda
