// GEMMs through cuBLASLt for the bf16 path and the FP8 linear layers: the bias added in the GEMM's
// epilogue (one rounding of y = x·Wᵀ + b to bf16, no separate pass over y), and, per GEMM shape,
// the matmul descriptors and the algorithm chosen once and cached, so that a training step makes
// no heuristic query and builds no descriptor.
//
// The algorithm: cuBLASLt's heuristic ranks candidates by a model of the GPU, which for the
// narrow shapes of a small transformer (k = 768) is often not the fastest. Unless told to take
// the heuristic's first choice (set_timed_choice(false): deterministic mode, where every run must
// pick the same algorithm), the first call of a shape times the heuristic's best few on the
// call's own operands and keeps the fastest. Timing runs the GEMM several times; D is restored
// afterwards when the GEMM accumulates into it. A call being recorded into a CUDA graph cannot be
// timed and takes the heuristic's choice.
//
// Shapes come in families (each of m, n and k rounded up to a power of two): a family's first
// four shapes are timed, and its later shapes take the last timed choice where cuBLASLt accepts
// it for them (cublasLtMatmulAlgoCheck). A mixture of experts' GEMMs change their row count in nearly
// every call; without this each call would query the heuristic and time its candidates.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

namespace mgt::cuda {

// What the GEMM's epilogue does besides writing D (bias: add bias[m] down the columns).
enum class LtEpilogue {
  kNone,
  kBias,
  kGeluTanhAux,      // D = gelu_tanh(A·B (+ bias)), aux = its input (for the backward)
  kGeluTanhAuxBias,
  kGeluTanhGrad,     // D = (A·B) ⊙ gelu_tanh'(aux)
};

// The extra operand of the GELU epilogues: column-major like D, of D's type.
struct LtAux {
  void* data = nullptr;
  int64_t ld = 0;
};

// An FP8 operand's factor back to its tensor's values (scale_inv), one fp32 in device memory:
// cuBLASLt multiplies the product by both (CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER).
struct LtScales {
  const float* a = nullptr;
  const float* b = nullptr;
};

class LtMatmul {
public:
  // `report` (--profile-gemms): each planned shape and its timed choice on stderr.
  LtMatmul(cudaStream_t stream, bool report);
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;
  ~LtMatmul();

  // false: every shape takes cuBLASLt's heuristic first choice (the same on every run); applies to
  // shapes not yet planned.
  void set_timed_choice(bool timed) { timed_choice_ = timed; }

  // Column-major D[m, n] = op(A)·op(B) (+ bias[m] broadcast over columns when bias is not null)
  // + beta·C with C = D; A and B of type ab, D and bias of type d; fp32 accumulation.
  void matmul(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const void* a,
              int64_t lda, const void* b, int64_t ldb, float beta, void* d, int64_t ldd,
              cudaDataType_t ab, cudaDataType_t d_type, const void* bias, const char* name);
  // The same with one of the other epilogues (bias may be null for kGeluTanhAux). Returns false,
  // having done nothing, when cuBLASLt has no algorithm for it: the caller takes the unfused path.
  bool matmul(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, const void* a,
              int64_t lda, const void* b, int64_t ldb, float beta, void* d, int64_t ldd, cudaDataType_t ab,
              cudaDataType_t d_type, LtEpilogue epilogue, const void* bias, LtAux aux, const char* name);
  // FP8 (Hopper's tensor cores): column-major D[m, n] = (Aᵀ·B)·scales.a·scales.b (+ bias[m]) +
  // beta·C with C = D, A stored k×m and B k×n (the one layout, "TN", of cuBLASLt's FP8 GEMMs), each
  // CUDA_R_8F_E4M3 or CUDA_R_8F_E5M2 (not both E5M2); D and bias of d_type. fast_accumulation:
  // CUBLASLT_MATMUL_DESC_FAST_ACCUM (the tensor cores' own accumulator for the whole k, never
  // promoted to fp32 registers on the way). Returns false, having done nothing, when cuBLASLt has
  // no algorithm for it: the caller takes another path. The GELU epilogues as for matmul above
  // (aux of d_type); where cuBLASLt plans one but then refuses to run it, the call also returns
  // false, and that shape is not tried again.
  bool matmul_fp8(int64_t m, int64_t n, int64_t k, const void* a, cudaDataType_t a_type, const void* b,
                  cudaDataType_t b_type, LtScales scales, bool fast_accumulation, float beta, void* d,
                  cudaDataType_t d_type, LtEpilogue epilogue, const void* bias, LtAux aux, const char* name);

private:
  // transpose A, B; m, n, k; lda, ldb, ldd; A's, B's and D's types; epilogue, aux ld; accumulate;
  // FP8 fast accumulation.
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int,
                         LtEpilogue, int64_t, bool, bool>;
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr;
    cublasLtMatrixLayout_t b = nullptr;
    cublasLtMatrixLayout_t d = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool found = false;
    // The heuristic's candidates until the first call has chosen among them by timing.
    std::vector<cublasLtMatmulAlgo_t> candidates;
    Key family{};         // the key of its shape's family (family_of), when the choice is timed
    int64_t d_bytes = 0;  // D's extent in memory, to restore it after timing an accumulation
    double flops = 0.0;   // 2·m·n·k, for the timing report
  };
  // The key with m, n and k rounded up to powers of two and the leading dimensions left out.
  static Key family_of(Key key);
  // Records p's chosen algorithm as its family's latest.
  void remember_choice(const Plan& p);
  // Destroys the cached plans' descriptors and forgets them.
  void forget_plans();
  // Throws when cuBLASLt has no algorithm, unless `optional` (then the plan is not found).
  Plan& plan(const Key& key, const char* name, bool optional = false);
  void run(Plan& p, const void* a, const void* b, float beta, void* d, const void* bias, LtAux aux,
           LtScales scales, const char* name);
  cublasStatus_t launch(Plan& p, const cublasLtMatmulAlgo_t& algo, const void* a, const void* b, float beta,
                        void* d, const void* bias, LtAux aux, LtScales scales, const char* name);
  // Sets p.algo to the fastest of p.candidates on these operands.
  void choose_by_timing(Plan& p, const void* a, const void* b, float beta, void* d, const void* bias,
                        LtAux aux, LtScales scales, const char* name);

  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::map<Key, Plan> plans_;
  struct FamilyChoice {
    cublasLtMatmulAlgo_t algo{};  // the last timed shape's choice
    int timed_shapes = 0;
  };
  std::map<Key, FamilyChoice> choices_;
  bool timed_choice_ = true;
  bool report_;
};

}  // namespace mgt::cuda
