#include "kernels/cuda/gemm.hpp"

#include <climits>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "kernels/cuda/cuda_check.hpp"

// cuBLAS is column-major: a row-major [m, n] matrix is its column-major transpose, so each
// row-major product below is computed as the transposed column-major one.
namespace mgt::cuda {
namespace {

int dim(int64_t v, const char* op) {
  if (v < 0 || v > INT_MAX) throw Error(std::string(op) + ": GEMM dimension out of cuBLAS's range");
  return static_cast<int>(v);
}

cudaDataType_t data_type(bool bf16) { return bf16 ? CUDA_R_16BF : CUDA_R_32F; }

// C[m, n] = alpha·op(A)·op(B) + beta·C, column-major; A and B of one type, C of its own.
void gemm(cublasHandle_t handle, MatmulPrecision precision, cublasOperation_t op_a,
          cublasOperation_t op_b, int64_t m, int64_t n, int64_t k, In a, int64_t lda, In b,
          int64_t ldb, float beta, Out c, int64_t ldc, const char* name) {
  if (a.bf16() != b.bf16()) throw Error(std::string(name) + ": operands of different types");
  const float alpha = 1.0f;
  const cublasComputeType_t compute =
      a.bf16() ? CUBLAS_COMPUTE_32F
               : precision == MatmulPrecision::kBf16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                                     : CUBLAS_COMPUTE_32F_PEDANTIC;
  MGT_CUBLAS_CHECK(cublasGemmEx(handle, op_a, op_b, dim(m, name), dim(n, name), dim(k, name),
                                &alpha, a.raw(), data_type(a.bf16()), dim(lda, name), b.raw(),
                                data_type(b.bf16()), dim(ldb, name), &beta, c.raw(),
                                data_type(c.bf16()), dim(ldc, name), compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

bool linear_forward(cublasHandle_t handle, LtMatmul& lt, MatmulPrecision precision, In x, In w,
                    In bias, int64_t rows, int64_t in, int64_t out, Out y) {
  if (rows == 0 || out == 0) return true;
  // yᵀ[out, rows] = W[out, in]·xᵀ[in, rows] (+ bias down the columns).
  if (x.bf16() && w.bf16()) {
    // The epilogue reads the bias as y's type; a bias of another type is left to the caller.
    const bool epilogue_bias = bias != nullptr && bias.bf16() == y.bf16();
    lt.matmul(true, false, out, rows, in, w.raw(), in, x.raw(), in, 0.0f, y.raw(), out,
              CUDA_R_16BF, data_type(y.bf16()), epilogue_bias ? bias.raw() : nullptr, "linear_forward");
    return bias == nullptr || epilogue_bias;
  }
  gemm(handle, precision, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, w, in, x, in, 0.0f, y, out,
       "linear_forward");
  return bias == nullptr;
}

void linear_backward_input(cublasHandle_t handle, LtMatmul& lt, MatmulPrecision precision, In dy,
                           In w, int64_t rows, int64_t in, int64_t out, Out dx) {
  if (rows == 0 || in == 0) return;
  // dxᵀ[in, rows] = Wᵀ[in, out]·dyᵀ[out, rows].
  if (dy.bf16() && w.bf16()) {
    lt.matmul(false, false, in, rows, out, w.raw(), in, dy.raw(), out, 0.0f, dx.raw(), in,
              CUDA_R_16BF, data_type(dx.bf16()), nullptr, "linear_backward_input");
    return;
  }
  gemm(handle, precision, CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, w, in, dy, out, 0.0f, dx, in,
       "linear_backward_input");
}

void linear_backward_weight(cublasHandle_t handle, LtMatmul& lt, MatmulPrecision precision, In dy,
                            In x, int64_t rows, int64_t in, int64_t out, Out dw) {
  if (in == 0 || out == 0) return;
  // dWᵀ[in, out] += xᵀ[in, rows]·dy[rows, out].
  if (dy.bf16() && x.bf16()) {
    lt.matmul(false, true, in, out, rows, x.raw(), in, dy.raw(), out, 1.0f, dw.raw(), in,
              CUDA_R_16BF, data_type(dw.bf16()), nullptr, "linear_backward_weight");
    return;
  }
  gemm(handle, precision, CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, x, in, dy, out, 1.0f, dw, in,
       "linear_backward_weight");
}

namespace {

// What cuBLASLt's GELU epilogues need: bf16 operands, the auxiliary matrix of the output's type,
// and its leading dimension a multiple of 8 elements at 16-byte-aligned addresses.
bool gelu_epilogue_fits(In a, In b, bool aux_bf16, const void* aux, Out d, int64_t aux_ld) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return a.bf16() && b.bf16() && aux_bf16 == d.bf16() && aux_ld % 8 == 0 && aligned(aux) && aligned(d.raw());
}

}  // namespace

bool linear_gelu_tanh_forward(LtMatmul& lt, In x, In w, In bias, int64_t rows, int64_t in, int64_t out,
                              Out pre, Out y) {
  if (!gelu_epilogue_fits(x, w, pre.bf16(), pre.raw(), y, out)) return false;
  if (bias != nullptr && bias.bf16() != y.bf16()) return false;  // the epilogue reads it as y's type
  if (rows == 0 || out == 0) return true;
  // yᵀ[out, rows] = gelu(W[out, in]·xᵀ[in, rows] + bias), preᵀ the GELU's input.
  return lt.matmul(true, false, out, rows, in, w.raw(), in, x.raw(), in, 0.0f, y.raw(), out, CUDA_R_16BF,
                   data_type(y.bf16()),
                   bias == nullptr ? LtEpilogue::kGeluTanhAux : LtEpilogue::kGeluTanhAuxBias, bias.raw(),
                   {pre.raw(), out}, "linear_gelu_tanh_forward");
}

bool linear_backward_input_gelu_tanh(LtMatmul& lt, In dy, In w, In pre, int64_t rows, int64_t in,
                                     int64_t out, Out dpre) {
  if (!gelu_epilogue_fits(dy, w, pre.bf16(), pre.raw(), dpre, in)) return false;
  if (rows == 0 || in == 0) return true;
  // dpreᵀ[in, rows] = (Wᵀ[in, out]·dyᵀ[out, rows]) ⊙ gelu'(preᵀ).
  return lt.matmul(false, false, in, rows, out, w.raw(), in, dy.raw(), out, 0.0f, dpre.raw(), in,
                   CUDA_R_16BF, data_type(dpre.bf16()), LtEpilogue::kGeluTanhGrad, nullptr,
                   {const_cast<void*>(pre.raw()), in}, "linear_backward_input_gelu_tanh");
}

}  // namespace mgt::cuda
