#include "kernels/cuda/lt_matmul.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "kernels/cuda_check.hpp"

namespace mgt::cuda {
namespace {

// cuBLASLt's recommendation for Hopper: enough for its split-K and stream-K algorithms.
constexpr size_t kWorkspaceBytes = 32u << 20;
// How many of the heuristic's candidates are timed, and how many runs each (after a warm-up).
constexpr int kCandidates = 8;
constexpr int kTimedRuns = 5;
// Exact shapes' plans kept before the cache starts afresh (the families' choices stay): the
// experts of a mixture see a new row count in most calls.
constexpr size_t kMaxPlans = 4096;
// Shapes of one family timed each before its later shapes take the last one's choice: a dense
// model's few shapes per family are all timed, as when each shape was timed on its own.
constexpr int kTimedPerFamily = 4;

int64_t next_power_of_two(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

// An algorithm's configuration, for the timing report.
std::string describe(const cublasLtMatmulAlgo_t& algo) {
  const auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attribute) {
    int32_t value = 0;
    size_t written = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof value, &written);
    return value;
  };
  return "id " + std::to_string(get(CUBLASLT_ALGO_CONFIG_ID)) + " tile " +
         std::to_string(get(CUBLASLT_ALGO_CONFIG_TILE_ID)) + " splitk " +
         std::to_string(get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) + " reduction " +
         std::to_string(get(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME)) + " stages " +
         std::to_string(get(CUBLASLT_ALGO_CONFIG_STAGES_ID)) + " cluster " +
         std::to_string(get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
}

int64_t element_bytes(cudaDataType_t type) { return type == CUDA_R_32F ? 4 : 2; }

bool is_fp8(cudaDataType_t type) { return type == CUDA_R_8F_E4M3 || type == CUDA_R_8F_E5M2; }

// A timing event, destroyed however the timing ends.
class TimingEvent {
public:
  TimingEvent() { MGT_CUDA_CHECK(cudaEventCreate(&event_)); }
  TimingEvent(const TimingEvent&) = delete;
  TimingEvent& operator=(const TimingEvent&) = delete;
  ~TimingEvent() { cudaEventDestroy(event_); }
  cudaEvent_t get() const { return event_; }

private:
  cudaEvent_t event_ = nullptr;
};

void check(cublasStatus_t status, const char* call, const char* name) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(std::string(name) + ": " + call + " failed: " + cublasGetStatusString(status));
  }
}

// cuBLASLt's GELU epilogues compute the tanh approximation, Megatron's fused bias-GELU.
cublasLtEpilogue_t lt_epilogue(LtEpilogue e) {
  switch (e) {
    case LtEpilogue::kNone: return CUBLASLT_EPILOGUE_DEFAULT;
    case LtEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case LtEpilogue::kGeluTanhAux: return CUBLASLT_EPILOGUE_GELU_AUX;
    case LtEpilogue::kGeluTanhAuxBias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case LtEpilogue::kGeluTanhGrad: return CUBLASLT_EPILOGUE_DGELU;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool has_bias(LtEpilogue e) {
  return e == LtEpilogue::kBias || e == LtEpilogue::kGeluTanhAuxBias;
}
bool has_aux(LtEpilogue e) {
  return e == LtEpilogue::kGeluTanhAux || e == LtEpilogue::kGeluTanhAuxBias || e == LtEpilogue::kGeluTanhGrad;
}

template <typename T>
void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value,
         const char* what, const char* name) {
  check(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value), what, name);
}

}  // namespace

LtMatmul::LtMatmul(cudaStream_t stream, bool report) : stream_(stream), report_(report) {
  check(cublasLtCreate(&handle_), "cublasLtCreate", "LtMatmul");
  MGT_CUDA_CHECK(cudaMallocAsync(&workspace_, kWorkspaceBytes, stream_));
}

LtMatmul::~LtMatmul() {
  forget_plans();
  if (workspace_ != nullptr) cudaFreeAsync(workspace_, stream_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

void LtMatmul::forget_plans() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.d);
    cublasLtMatmulDescDestroy(p.desc);
  }
  plans_.clear();
}

LtMatmul::Key LtMatmul::family_of(Key key) {
  std::get<2>(key) = next_power_of_two(std::get<2>(key));
  std::get<3>(key) = next_power_of_two(std::get<3>(key));
  std::get<4>(key) = next_power_of_two(std::get<4>(key));
  std::get<5>(key) = std::get<6>(key) = std::get<7>(key) = 0;
  return key;
}

void LtMatmul::remember_choice(const Plan& p) {
  FamilyChoice& family = choices_[p.family];
  family.algo = p.algo;
  ++family.timed_shapes;
}

LtMatmul::Plan& LtMatmul::plan(const Key& key, const char* name, bool optional) {
  if (const auto found = plans_.find(key); found != plans_.end()) return found->second;
  if (plans_.size() >= kMaxPlans) forget_plans();
  const auto [ta, tb, m, n, k, lda, ldb, ldd, a_int, b_int, d_int, epilogue, aux_ld, accumulate, fast_accumulation] =
      key;
  const auto a_type = static_cast<cudaDataType_t>(a_int);
  const auto b_type = static_cast<cudaDataType_t>(b_int);
  const auto d_type = static_cast<cudaDataType_t>(d_int);
  Plan p;
  check(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate", name);
  const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a),
        "cublasLtMatmulDescSetAttribute(TRANSA)", name);
  check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b),
        "cublasLtMatmulDescSetAttribute(TRANSB)", name);
  if (is_fp8(a_type)) {
    set(p.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, static_cast<int8_t>(fast_accumulation ? 1 : 0),
        "cublasLtMatmulDescSetAttribute(FAST_ACCUM)", name);
  }
  if (epilogue != LtEpilogue::kNone) {
    set(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, lt_epilogue(epilogue), "cublasLtMatmulDescSetAttribute(EPILOGUE)",
        name);
  }
  if (has_bias(epilogue)) {
    set(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(d_type),
        "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)", name);
  }
  if (has_aux(epilogue)) {
    set(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, aux_ld, "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_LD)",
        name);
    set(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, static_cast<int32_t>(d_type),
        "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_DATA_TYPE)", name);
  }
  // Column-major layouts of the stored matrices: op(A) is m×k, so A is stored k×m when
  // transposed.
  check(cublasLtMatrixLayoutCreate(&p.a, a_type, ta ? k : m, ta ? m : k, lda), "cublasLtMatrixLayoutCreate(A)",
        name);
  check(cublasLtMatrixLayoutCreate(&p.b, b_type, tb ? n : k, tb ? k : n, ldb), "cublasLtMatrixLayoutCreate(B)",
        name);
  check(cublasLtMatrixLayoutCreate(&p.d, d_type, m, n, ldd), "cublasLtMatrixLayoutCreate(D)", name);
  p.d_bytes = ldd * n * element_bytes(d_type);
  p.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  // A shape of a family whose first shapes were timed takes the last one's choice where cuBLASLt
  // confirms it runs this shape: no heuristic query, no timing. (Deterministic runs plan every
  // shape by the heuristic alone: a resumed run's choices must not depend on the shapes before.)
  if (timed_choice_) {
    p.family = family_of(key);
    if (const auto chosen = choices_.find(p.family);
        chosen != choices_.end() && chosen->second.timed_shapes >= kTimedPerFamily) {
      cublasLtMatmulHeuristicResult_t checked{};
      if (cublasLtMatmulAlgoCheck(handle_, p.desc, p.a, p.b, p.d, p.d, &chosen->second.algo, &checked) ==
              CUBLAS_STATUS_SUCCESS &&
          checked.workspaceSize <= kWorkspaceBytes) {
        p.algo = chosen->second.algo;
        p.found = true;
        return plans_.emplace(key, p).first->second;
      }
    }
  }
  cublasLtMatmulPreference_t preference = nullptr;
  check(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate", name);
  const size_t workspace = kWorkspaceBytes;
  check(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &workspace, sizeof workspace),
        "cublasLtMatmulPreferenceSetAttribute", name);
  cublasLtMatmulHeuristicResult_t results[kCandidates]{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle_, p.desc, p.a, p.b, p.d, p.d, preference, timed_choice_ ? kCandidates : 1, results, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (optional && (status != CUBLAS_STATUS_SUCCESS || found == 0)) {
    return plans_.emplace(key, p).first->second;  // remembered as not found
  }
  check(status, "cublasLtMatmulAlgoGetHeuristic", name);
  if (found == 0) throw Error(std::string(name) + ": cuBLASLt has no algorithm for this GEMM");
  p.algo = results[0].algo;
  p.found = true;
  if (found > 1) {
    for (int i = 0; i < found; ++i) p.candidates.push_back(results[i].algo);
  } else if (timed_choice_) {
    remember_choice(p);
  }
  if (report_) {
    std::fprintf(stderr, "gemm plan %s: m %lld n %lld k %lld%s%s%s epilogue %d%s, %d candidates\n", name,
                 static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k), ta ? " A^T" : "",
                 tb ? " B^T" : "", is_fp8(a_type) ? (fast_accumulation ? " fp8 fast-accumulating" : " fp8") : "",
                 static_cast<int>(epilogue), accumulate ? " accumulating" : "", found);
  }
  return plans_.emplace(key, p).first->second;
}

void LtMatmul::matmul(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                      const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* d,
                      int64_t ldd, cudaDataType_t ab, cudaDataType_t d_type, const void* bias,
                      const char* name) {
  const LtEpilogue epilogue = bias != nullptr ? LtEpilogue::kBias : LtEpilogue::kNone;
  Plan& p = plan({transpose_a, transpose_b, m, n, k, lda, ldb, ldd, static_cast<int>(ab), static_cast<int>(ab),
                  static_cast<int>(d_type), epilogue, 0, beta != 0.0f, false},
                 name);
  run(p, a, b, beta, d, bias, {}, {}, name);
}

bool LtMatmul::matmul(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                      const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* d,
                      int64_t ldd, cudaDataType_t ab, cudaDataType_t d_type, LtEpilogue epilogue,
                      const void* bias, LtAux aux, const char* name) {
  Plan& p = plan({transpose_a, transpose_b, m, n, k, lda, ldb, ldd, static_cast<int>(ab), static_cast<int>(ab),
                  static_cast<int>(d_type), epilogue, aux.ld, beta != 0.0f, false},
                 name, true);
  if (!p.found) return false;
  run(p, a, b, beta, d, bias, aux, {}, name);
  return true;
}

bool LtMatmul::matmul_fp8(int64_t m, int64_t n, int64_t k, const void* a, cudaDataType_t a_type, const void* b,
                          cudaDataType_t b_type, LtScales scales, bool fast_accumulation, float beta, void* d,
                          cudaDataType_t d_type, LtEpilogue epilogue, const void* bias, LtAux aux,
                          const char* name) {
  Plan& p = plan({true, false, m, n, k, k, k, m, static_cast<int>(a_type), static_cast<int>(b_type),
                  static_cast<int>(d_type), epilogue, aux.ld, beta != 0.0f, fast_accumulation},
                 name, true);
  if (!p.found) return false;
  if (!has_aux(epilogue)) {
    run(p, a, b, beta, d, bias, aux, scales, name);
    return true;
  }
  // cuBLASLt's tables of FP8 epilogues differ between versions: one it plans may still fail to
  // launch. A GELU epilogue does not accumulate, so a failed try leaves nothing to undo.
  if (!p.candidates.empty()) choose_by_timing(p, a, b, beta, d, bias, aux, scales, name);
  if (launch(p, p.algo, a, b, beta, d, bias, aux, scales, name) != CUBLAS_STATUS_SUCCESS) {
    p.found = false;
    return false;
  }
  return true;
}

void LtMatmul::run(Plan& p, const void* a, const void* b, float beta, void* d, const void* bias,
                   LtAux aux, LtScales scales, const char* name) {
  if (!p.candidates.empty()) choose_by_timing(p, a, b, beta, d, bias, aux, scales, name);
  check(launch(p, p.algo, a, b, beta, d, bias, aux, scales, name), "cublasLtMatmul", name);
}

cublasStatus_t LtMatmul::launch(Plan& p, const cublasLtMatmulAlgo_t& algo, const void* a, const void* b,
                                float beta, void* d, const void* bias, LtAux aux, LtScales scales,
                                const char* name) {
  // Pointers are per call; the rest of the descriptor is the cached plan's.
  if (bias != nullptr) {
    set(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias, "cublasLtMatmulDescSetAttribute(BIAS_POINTER)", name);
  }
  if (aux.data != nullptr) {
    set(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux.data,
        "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_POINTER)", name);
  }
  if (scales.a != nullptr) {
    set(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, scales.a, "cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)",
        name);
  }
  if (scales.b != nullptr) {
    set(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, scales.b, "cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)",
        name);
  }
  const float alpha = 1.0f;
  return cublasLtMatmul(handle_, p.desc, &alpha, a, p.a, b, p.b, &beta, d, p.d, d, p.d, &algo, workspace_,
                        kWorkspaceBytes, stream_);
}

void LtMatmul::choose_by_timing(Plan& p, const void* a, const void* b, float beta, void* d, const void* bias,
                                LtAux aux, LtScales scales, const char* name) {
  std::vector<cublasLtMatmulAlgo_t> candidates;
  candidates.swap(p.candidates);  // chosen once, whatever happens below
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  MGT_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capture));
  if (capture != cudaStreamCaptureStatusNone) return;  // the heuristic's first choice stays
  // Every timed run writes D (and a GELU epilogue's aux) with the values of the call itself, so
  // only an accumulation (beta != 0) must get its D back. A D that overwrites an operand (the
  // gradient through a GELU written over its saved input) would change the later runs' inputs:
  // such a call keeps the heuristic's choice.
  if (d == a || d == b || d == aux.data) return;
  std::vector<unsigned char> saved;
  if (beta != 0.0f) {
    saved.resize(static_cast<size_t>(p.d_bytes));
    MGT_CUDA_CHECK(cudaMemcpyAsync(saved.data(), d, saved.size(), cudaMemcpyDeviceToHost, stream_));
    MGT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  TimingEvent start;
  TimingEvent stop;
  float best = 0.0f;
  float first = -1.0f;
  bool timed_any = false;
  for (const cublasLtMatmulAlgo_t& algo : candidates) {
    if (launch(p, algo, a, b, beta, d, bias, aux, scales, name) != CUBLAS_STATUS_SUCCESS) continue;  // warm-up
    MGT_CUDA_CHECK(cudaEventRecord(start.get(), stream_));
    bool ran = true;
    for (int i = 0; i < kTimedRuns && ran; ++i) {
      ran = launch(p, algo, a, b, beta, d, bias, aux, scales, name) == CUBLAS_STATUS_SUCCESS;
    }
    MGT_CUDA_CHECK(cudaEventRecord(stop.get(), stream_));
    MGT_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float ms = 0.0f;
    MGT_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    if (ran && first < 0.0f) first = ms / kTimedRuns;
    if (ran && (!timed_any || ms < best)) {
      best = ms;
      p.algo = algo;
      timed_any = true;
    }
  }
  remember_choice(p);
  if (report_ && timed_any) {
    const double seconds = best / kTimedRuns / 1e3;
    std::fprintf(stderr, "gemm timed %s: best %.4f ms (%.0f TFLOP/s; heuristic's first %.4f ms) of %zu: %s\n", name,
                 seconds * 1e3, p.flops / seconds / 1e12, first, candidates.size(), describe(p.algo).c_str());
  }
  if (!saved.empty()) {
    MGT_CUDA_CHECK(cudaMemcpyAsync(d, saved.data(), saved.size(), cudaMemcpyHostToDevice, stream_));
    MGT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
}

}  // namespace mgt::cuda
