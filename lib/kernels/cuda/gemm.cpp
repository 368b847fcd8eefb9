#include "kernels/cuda/gemm.hpp"

#include <climits>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "kernels/cuda_check.hpp"

// cuBLAS is column-major: a row-major [m, n] matrix is its column-major transpose, so each
// row-major product below is computed as the transposed column-major one.
namespace mgt::cuda {

cudaDataType_t data_type(FloatType type) {
  switch (type) {
    case FloatType::kF32: return CUDA_R_32F;
    case FloatType::kBf16: return CUDA_R_16BF;
    case FloatType::kF16: return CUDA_R_16F;
  }
  return CUDA_R_32F;
}

namespace {

int dim(int64_t v, const char* op) {
  if (v < 0 || v > INT_MAX) throw Error(std::string(op) + ": GEMM dimension out of cuBLAS's range");
  return static_cast<int>(v);
}

// Both operands of one 2-byte type: cuBLASLt's tensor-core GEMMs, with fp32 accumulation.
bool narrow_pair(In a, In b) { return a.narrow() && a.type() == b.type(); }

// C[m, n] = alpha·op(A)·op(B) + beta·C, column-major; A and B of one type, C of its own.
void gemm(cublasHandle_t handle, MatmulPrecision precision, cublasOperation_t op_a,
          cublasOperation_t op_b, int64_t m, int64_t n, int64_t k, In a, int64_t lda, In b,
          int64_t ldb, float beta, Out c, int64_t ldc, const char* name) {
  if (a.type() != b.type()) throw Error(std::string(name) + ": operands of different types");
  const float alpha = 1.0f;
  const cublasComputeType_t compute =
      a.narrow()                              ? CUBLAS_COMPUTE_32F
      : precision == MatmulPrecision::kBf16 ? CUBLAS_COMPUTE_32F_FAST_16BF
      : precision == MatmulPrecision::kFp16 ? CUBLAS_COMPUTE_32F_FAST_16F
                                            : CUBLAS_COMPUTE_32F_PEDANTIC;
  MGT_CUBLAS_CHECK(cublasGemmEx(handle, op_a, op_b, dim(m, name), dim(n, name), dim(k, name),
                                &alpha, a.raw(), data_type(a.type()), dim(lda, name), b.raw(),
                                data_type(b.type()), dim(ldb, name), &beta, c.raw(),
                                data_type(c.type()), dim(ldc, name), compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

bool linear_forward(cublasHandle_t handle, LtMatmul& lt, MatmulPrecision precision, In x, In w,
                    In bias, int64_t rows, int64_t in, int64_t out, Out y) {
  if (rows == 0 || out == 0) return true;
  // yᵀ[out, rows] = W[out, in]·xᵀ[in, rows] (+ bias down the columns).
  if (narrow_pair(x, w)) {
    // The epilogue reads the bias as y's type; a bias of another type is left to the caller.
    const bool epilogue_bias = bias != nullptr && bias.type() == y.type();
    lt.matmul(true, false, out, rows, in, w.raw(), in, x.raw(), in, 0.0f, y.raw(), out,
              data_type(x.type()), data_type(y.type()), epilogue_bias ? bias.raw() : nullptr, "linear_forward");
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
  if (narrow_pair(dy, w)) {
    lt.matmul(false, false, in, rows, out, w.raw(), in, dy.raw(), out, 0.0f, dx.raw(), in,
              data_type(dy.type()), data_type(dx.type()), nullptr, "linear_backward_input");
    return;
  }
  gemm(handle, precision, CUBLAS_OP_N, CUBLAS_OP_N, in, rows, out, w, in, dy, out, 0.0f, dx, in,
       "linear_backward_input");
}

void linear_backward_weight(cublasHandle_t handle, LtMatmul& lt, MatmulPrecision precision, In dy,
                            In x, int64_t rows, int64_t in, int64_t out, Out dw, bool accumulate) {
  if (in == 0 || out == 0) return;
  // dWᵀ[in, out] (+)= xᵀ[in, rows]·dy[rows, out]. Written over (β = 0), the GEMM does not read
  // the old gradient.
  const float beta = accumulate ? 1.0f : 0.0f;
  if (narrow_pair(dy, x)) {
    lt.matmul(false, true, in, out, rows, x.raw(), in, dy.raw(), out, beta, dw.raw(), in,
              data_type(dy.type()), data_type(dw.type()), nullptr, "linear_backward_weight");
    return;
  }
  gemm(handle, precision, CUBLAS_OP_N, CUBLAS_OP_T, in, out, rows, x, in, dy, out, beta, dw, in,
       "linear_backward_weight");
}

namespace {

// What cuBLASLt's GELU epilogues need: 2-byte operands of one type, the auxiliary matrix of the
// output's type, and its leading dimension a multiple of 8 elements at 16-byte-aligned addresses.
bool gelu_epilogue_fits(In a, In b, FloatType aux_type, const void* aux, Out d, int64_t aux_ld) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return narrow_pair(a, b) && aux_type == d.type() && aux_ld % 8 == 0 && aligned(aux) && aligned(d.raw());
}

}  // namespace

bool linear_gelu_tanh_forward(LtMatmul& lt, In x, In w, In bias, int64_t rows, int64_t in, int64_t out,
                              Out pre, Out y) {
  if (!gelu_epilogue_fits(x, w, pre.type(), pre.raw(), y, out)) return false;
  if (bias != nullptr && bias.type() != y.type()) return false;  // the epilogue reads it as y's type
  if (rows == 0 || out == 0) return true;
  // yᵀ[out, rows] = gelu(W[out, in]·xᵀ[in, rows] + bias), preᵀ the GELU's input.
  return lt.matmul(true, false, out, rows, in, w.raw(), in, x.raw(), in, 0.0f, y.raw(), out, data_type(x.type()),
                   data_type(y.type()),
                   bias == nullptr ? LtEpilogue::kGeluTanhAux : LtEpilogue::kGeluTanhAuxBias, bias.raw(),
                   {pre.raw(), out}, "linear_gelu_tanh_forward");
}

bool linear_backward_input_gelu_tanh(LtMatmul& lt, In dy, In w, In pre, int64_t rows, int64_t in,
                                     int64_t out, Out dpre) {
  if (!gelu_epilogue_fits(dy, w, pre.type(), pre.raw(), dpre, in)) return false;
  if (rows == 0 || in == 0) return true;
  // dpreᵀ[in, rows] = (Wᵀ[in, out]·dyᵀ[out, rows]) ⊙ gelu'(preᵀ).
  return lt.matmul(false, false, in, rows, out, w.raw(), in, dy.raw(), out, 0.0f, dpre.raw(), in,
                   data_type(dy.type()), data_type(dpre.type()), LtEpilogue::kGeluTanhGrad, nullptr,
                   {const_cast<void*>(pre.raw()), in}, "linear_backward_input_gelu_tanh");
}

}  // namespace mgt::cuda
