#include "kernels/cuda/grouped_gemm.hpp"

#include <algorithm>
#include <climits>
#include <optional>

#include "kernels/cuda/gemm.hpp"
#include "kernels/cuda/grouped_gemm_pointers.hpp"
#include "kernels/cuda_check.hpp"

// cuBLAS is column-major: a row-major [m, n] matrix is its column-major transpose, so each
// row-major product is computed as the transposed column-major one (as in gemm.cpp).
namespace mgt::cuda {
namespace {

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The compute type of a grouped GEMM on A and B of type `ab` into C of type `c`, where cuBLAS's
// grouped GEMM has one (cublasGemmGroupedBatchedEx's table of types).
std::optional<cublasComputeType_t> compute_type(FloatType ab, FloatType c, Backend::MatmulPrecision precision) {
  if (ab != c) return std::nullopt;
  if (ab != FloatType::kF32) return CUBLAS_COMPUTE_32F;
  if (precision == Backend::MatmulPrecision::kFp32) return CUBLAS_COMPUTE_32F_PEDANTIC;
  return std::nullopt;
}

}  // namespace

bool GroupedGemm::run(cublasOperation_t op_a, cublasOperation_t op_b, const std::vector<Problem>& problems,
                      FloatType ab, FloatType c, float beta, MatmulPrecision precision) {
  const std::optional<cublasComputeType_t> compute = compute_type(ab, c, precision);
  if (!compute) return false;
  if (std::find(refused_.begin(), refused_.end(), std::pair(ab, *compute)) != refused_.end()) return false;
  const bool narrow = ab != FloatType::kF32;
  for (const Problem& p : problems) {
    for (const int64_t v : {p.m, p.n, p.k, p.lda, p.ldb, p.ldc})
      if (v > INT_MAX) return false;
    // 2-byte operands: cuBLAS asks 16-byte aligned matrices (or less, depending on k); ours
    // usually are, and the per-group GEMMs take the others.
    if (narrow && !(aligned16(p.a) && aligned16(p.b) && aligned16(p.c))) return false;
  }
  if (problems.empty()) return true;

  const size_t count = problems.size();
  std::vector<const void*> pointers(3 * count);
  std::vector<int> m(count), n(count), k(count), lda(count), ldb(count), ldc(count);
  for (size_t i = 0; i < count; ++i) {
    const Problem& p = problems[i];
    pointers[i] = p.a;
    pointers[count + i] = p.b;
    pointers[2 * count + i] = p.c;
    m[i] = static_cast<int>(p.m);
    n[i] = static_cast<int>(p.n);
    k[i] = static_cast<int>(p.k);
    lda[i] = static_cast<int>(p.lda);
    ldb[i] = static_cast<int>(p.ldb);
    ldc[i] = static_cast<int>(p.ldc);
  }
  // One problem per cuBLAS group: the row counts differ between groups.
  const std::vector<cublasOperation_t> ops_a(count, op_a), ops_b(count, op_b);
  const std::vector<float> alphas(count, 1.0f), betas(count, beta);
  const std::vector<int> group_size(count, 1);

  if (pointers_.size() < static_cast<int64_t>(pointers.size()))
    pointers_ = DeviceArray<const void*>(*backend_, std::max<int64_t>(static_cast<int64_t>(pointers.size()), 192));
  const void** device = pointers_.view().data();
  write_device_pointers(pointers.data(), pointers.size(), device, stream_);
  const cudaDataType_t ab_type = data_type(ab);
  const cublasStatus_t status = cublasGemmGroupedBatchedEx(
      handle_, ops_a.data(), ops_b.data(), m.data(), n.data(), k.data(), alphas.data(), device, ab_type, lda.data(),
      device + count, ab_type, ldb.data(), betas.data(), const_cast<void* const*>(device + 2 * count), data_type(c),
      ldc.data(), static_cast<int>(count), group_size.data(), *compute);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
    refused_.emplace_back(ab, *compute);
    return false;
  }
  MGT_CUBLAS_CHECK(status);
  return true;
}

bool GroupedGemm::forward(ConstFloatView x, std::span<const ConstFloatView> w, std::span<const int64_t> group_rows,
                          int64_t in, int64_t out, FloatView y, MatmulPrecision precision) {
  // yᵀ_g[out, rows] = W_g[out, in]·xᵀ_g[in, rows].
  if (in == 0) return false;  // y = 0 (+ bias): cuBLAS's leading dimensions would be 0
  std::vector<Problem> problems;
  int64_t first = 0;
  for (size_t g = 0; g < group_rows.size(); ++g) {
    const int64_t rows = group_rows[g];
    if (w[g].type() != x.type()) return false;
    if (rows > 0)
      problems.push_back({w[g].raw(), x.subspan(first * in, rows * in).raw(), y.subspan(first * out, rows * out).raw(),
                          out, rows, in, in, in, out});
    first += rows;
  }
  return run(CUBLAS_OP_T, CUBLAS_OP_N, problems, x.type(), y.type(), 0.0f, precision);
}

bool GroupedGemm::backward_input(ConstFloatView dy, std::span<const ConstFloatView> w,
                                 std::span<const int64_t> group_rows, int64_t in, int64_t out, FloatView dx,
                                 MatmulPrecision precision) {
  // dxᵀ_g[in, rows] = Wᵀ_g[in, out]·dyᵀ_g[out, rows].
  if (out == 0) return false;  // dx = 0: cuBLAS's leading dimensions would be 0
  std::vector<Problem> problems;
  int64_t first = 0;
  for (size_t g = 0; g < group_rows.size(); ++g) {
    const int64_t rows = group_rows[g];
    if (w[g].type() != dy.type()) return false;
    if (rows > 0)
      problems.push_back({w[g].raw(), dy.subspan(first * out, rows * out).raw(),
                          dx.subspan(first * in, rows * in).raw(), in, rows, out, in, out, in});
    first += rows;
  }
  return run(CUBLAS_OP_N, CUBLAS_OP_N, problems, dy.type(), dx.type(), 0.0f, precision);
}

bool GroupedGemm::backward_weight(ConstFloatView dy, ConstFloatView x, std::span<const int64_t> group_rows,
                                  int64_t in, int64_t out, std::span<const FloatView> dw,
                                  MatmulPrecision precision) {
  // dWᵀ_g[in, out] += xᵀ_g[in, rows]·dy_g[rows, out].
  if (x.type() != dy.type()) return false;
  std::vector<Problem> problems;
  int64_t first = 0;
  for (size_t g = 0; g < group_rows.size(); ++g) {
    const int64_t rows = group_rows[g];
    if (dw[g].type() != dw.front().type()) return false;
    if (rows > 0)
      problems.push_back({x.subspan(first * in, rows * in).raw(), dy.subspan(first * out, rows * out).raw(),
                          dw[g].raw(), in, out, rows, in, out, in});
    first += rows;
  }
  return run(CUBLAS_OP_N, CUBLAS_OP_T, problems, x.type(), dw.front().type(), 1.0f, precision);
}

}  // namespace mgt::cuda
