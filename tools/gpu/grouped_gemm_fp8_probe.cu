// The FP8 grouped GEMM of lib/kernels/cuda/grouped_gemm_hopper.cu alone, against cuBLASLt's FP8
// GEMM one group at a time (the per-expert GEMMs it replaces): an FP8 linear layer's three GEMMs
// as Transformer Engine's hybrid recipe runs them (forward E4M3 · E4M3 with fast accumulation,
// input and weight gradients E5M2 · E4M3 with the split accumulator, the weight gradient added to
// fp32), first on small odd shapes (the largest difference from cuBLASLt's result, relative to its
// largest value), then timed at a Mixtral-style layer's shapes (8 experts of 2,048 → 11,264 →
// 5,632 → 2,048 over 8,224 routed rows) beside cuBLASLt's GEMMs one after another and side by
// side on four streams.
// Built on the development machine and run on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90a -Ilib -o .probe/grouped_gemm_fp8_probe tools/gpu/grouped_gemm_fp8_probe.cu \
//     lib/kernels/cuda/grouped_gemm_hopper.cu lib/kernels/cuda/cuda_check.cpp -lcublasLt
//   (there) export LD_LIBRARY_PATH=/usr/local/cuda/lib64; .probe/grouped_gemm_fp8_probe
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/cuda/grouped_gemm_hopper.hpp"

using mgt::FloatType;
using mgt::cuda::GroupedFp8GemmShape;
using mgt::cuda::GroupedGemmGroup;

#define CK(x)                                               \
  do {                                                      \
    if ((x) != 0) {                                         \
      std::printf("failed: %s at line %d\n", #x, __LINE__); \
      std::exit(1);                                         \
    }                                                       \
  } while (0)

namespace {

// The linear layer's GEMMs: D[m, n] (+)= A[m, k]·B[n, k]ᵀ·sa·sb.
enum class Kind { kForward, kInput, kWeight, kWeightWrite };
const char* name(Kind k) {
  return k == Kind::kForward ? "forward" : k == Kind::kInput ? "input grad" : k == Kind::kWeight ? "weight grad" : "weight grad, written";
}
bool f32_out(Kind k) { return k == Kind::kWeight || k == Kind::kWeightWrite; }
bool e5m2_a(Kind k) { return k != Kind::kForward; }

struct Problem {
  int64_t m, n, k;
  uint8_t *a, *b;
  void* d;
  float *sa, *sb;
};

std::mt19937 rng(11);

uint8_t* device_codes(int64_t n, bool e5m2) {
  std::vector<uint8_t> h(std::max<int64_t>(n, 1));
  std::normal_distribution<float> dist(0.0f, e5m2 ? 4.0f : 40.0f);
  for (auto& v : h) v = e5m2 ? __nv_fp8_e5m2(dist(rng)).__x : __nv_fp8_e4m3(dist(rng)).__x;
  uint8_t* d = nullptr;
  CK(cudaMalloc(&d, h.size()));
  CK(cudaMemcpy(d, h.data(), h.size(), cudaMemcpyHostToDevice));
  return d;
}

float* device_scale() {
  std::uniform_real_distribution<float> dist(0.001f, 0.01f);
  const float v = dist(rng);
  float* d = nullptr;
  CK(cudaMalloc(&d, 16));
  CK(cudaMemcpy(d, &v, 4, cudaMemcpyHostToDevice));
  return d;
}

// Group g: m_of[g] (or n, k as the kind places the rows) — the kind's GEMM over each expert's rows.
std::vector<Problem> make(Kind kind, const std::vector<int64_t>& rows, int64_t in, int64_t out) {
  std::vector<Problem> ps;
  for (int64_t r : rows) {
    Problem p{};
    if (kind == Kind::kForward) p.m = r, p.n = out, p.k = in;
    else if (kind == Kind::kInput) p.m = r, p.n = in, p.k = out;
    else p.m = out, p.n = in, p.k = r;
    p.a = device_codes(p.m * p.k, e5m2_a(kind));
    p.b = device_codes(p.n * p.k, false);
    const int64_t bytes = std::max<int64_t>(p.m * p.n, 1) * (f32_out(kind) ? 4 : 2);
    CK(cudaMalloc(&p.d, bytes));
    CK(cudaMemset(p.d, 0, bytes));
    p.sa = device_scale();
    p.sb = device_scale();
    ps.push_back(p);
  }
  return ps;
}

bool grouped(Kind kind, const std::vector<Problem>& ps, cudaStream_t s) {
  std::vector<GroupedGemmGroup> gs;
  for (const Problem& p : ps) {
    GroupedGemmGroup g;
    g.a = p.a, g.a_ld = p.k, g.b = p.b, g.b_ld = p.k, g.d = p.d, g.d_ld = p.n, g.m = p.m, g.n = p.n, g.k = p.k;
    g.a_scale_inv = p.sa, g.b_scale_inv = p.sb;
    gs.push_back(g);
  }
  GroupedFp8GemmShape shape;
  shape.a_e5m2 = e5m2_a(kind);
  shape.d_type = f32_out(kind) ? FloatType::kF32 : FloatType::kBf16;
  shape.accumulate = kind == Kind::kWeight;
  shape.fast_accumulation = kind == Kind::kForward;
  return mgt::cuda::grouped_gemm_hopper_fp8(shape, gs.data(), gs.size(), s);
}

// cuBLASLt's FP8 GEMM as mgt's fp8_linear calls it: column-major Dᵀ[n, m] = B[n, k]·Aᵀ, "TN".
struct LtGemm {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc, ld;
  cublasLtMatmulAlgo_t algo;
};
cublasLtHandle_t lt;
void* workspace;
constexpr size_t kWorkspace = 32 << 20;

LtGemm plan(Kind kind, const Problem& p) {
  LtGemm g;
  CK(cublasLtMatmulDescCreate(&g.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
  CK(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n));
  CK(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &p.sb, sizeof p.sb));
  CK(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &p.sa, sizeof p.sa));
  const int8_t fast = kind == Kind::kForward;
  CK(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
  const cudaDataType_t out = f32_out(kind) ? CUDA_R_32F : CUDA_R_16BF;
  CK(cublasLtMatrixLayoutCreate(&g.la, CUDA_R_8F_E4M3, p.k, p.n, p.k));
  CK(cublasLtMatrixLayoutCreate(&g.lb, e5m2_a(kind) ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3, p.k, p.m, p.k));
  CK(cublasLtMatrixLayoutCreate(&g.lc, out, p.n, p.m, p.n));
  CK(cublasLtMatrixLayoutCreate(&g.ld, out, p.n, p.m, p.n));
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace,
                                          sizeof kWorkspace));
  cublasLtMatmulHeuristicResult_t r;
  int found = 0;
  CK(cublasLtMatmulAlgoGetHeuristic(lt, g.desc, g.la, g.lb, g.lc, g.ld, pref, 1, &r, &found));
  if (found == 0) {
    std::printf("cuBLASLt: no FP8 algorithm for m %lld n %lld k %lld\n", (long long)p.m, (long long)p.n,
                (long long)p.k);
    std::exit(1);
  }
  g.algo = r.algo;
  CK(cublasLtMatmulPreferenceDestroy(pref));
  return g;
}

void per_group(Kind kind, const std::vector<Problem>& ps, const std::vector<LtGemm>& plans,
               const std::vector<cudaStream_t>& streams) {
  const float one = 1.0f, beta = kind == Kind::kWeight ? 1.0f : 0.0f;
  for (size_t g = 0; g < ps.size(); ++g) {
    const Problem& p = ps[g];
    if (p.m == 0 || p.n == 0) continue;
    if (p.k == 0) {  // cuBLASLt takes no k of 0: D = 0 or kept
      if (kind != Kind::kWeight) CK(cudaMemsetAsync(p.d, 0, p.m * p.n * 4, streams[g % streams.size()]));
      continue;
    }
    CK(cublasLtMatmul(lt, plans[g].desc, &one, p.b, plans[g].la, p.a, plans[g].lb, &beta, p.d, plans[g].lc, p.d,
                      plans[g].ld, &plans[g].algo, workspace, kWorkspace, streams[g % streams.size()]));
  }
}

std::vector<float> read(const Problem& p, Kind kind) {
  std::vector<float> out(p.m * p.n);
  if (f32_out(kind)) {
    CK(cudaMemcpy(out.data(), p.d, out.size() * 4, cudaMemcpyDeviceToHost));
  } else {
    std::vector<__nv_bfloat16> h(out.size());
    CK(cudaMemcpy(h.data(), p.d, h.size() * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < h.size(); ++i) out[i] = __bfloat162float(h[i]);
  }
  return out;
}

double check(Kind kind, const std::vector<Problem>& ps, const std::vector<LtGemm>& plans, cudaStream_t s) {
  std::vector<std::vector<float>> start;
  for (const Problem& p : ps) start.push_back(read(p, kind));
  per_group(kind, ps, plans, {s});
  CK(cudaStreamSynchronize(s));
  std::vector<std::vector<float>> want;
  for (const Problem& p : ps) want.push_back(read(p, kind));
  // The kernel's output starts as NaN, or as cuBLASLt's did where it adds.
  for (size_t g = 0; g < ps.size(); ++g) {
    const Problem& p = ps[g];
    if (kind == Kind::kWeight) CK(cudaMemcpy(p.d, start[g].data(), start[g].size() * 4, cudaMemcpyHostToDevice));
    else CK(cudaMemset(p.d, 0xff, p.m * p.n * (f32_out(kind) ? 4 : 2)));
  }
  if (!grouped(kind, ps, s)) return -1.0;
  CK(cudaStreamSynchronize(s));
  CK(cudaGetLastError());
  double err = 0.0, scale = 0.0;
  for (size_t g = 0; g < ps.size(); ++g) {
    const std::vector<float> got = read(ps[g], kind);
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(got[i])) return 1.0;
      err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[g][i]));
      scale = std::max(scale, std::fabs(static_cast<double>(want[g][i])));
    }
  }
  return err / std::max(scale, 1e-30);
}

template <typename F>
float time_ms(cudaStream_t s, F f, int reps = 20) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  CK(cudaEventRecord(a, s));
  for (int i = 0; i < reps; ++i) f();
  CK(cudaEventRecord(b, s));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  return ms / reps;
}

}  // namespace

int main() {
  CK(cublasLtCreate(&lt));
  CK(cudaMalloc(&workspace, kWorkspace));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<cudaStream_t> four{s};
  for (int i = 0; i < 3; ++i) {
    cudaStream_t t;
    CK(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking));
    four.push_back(t);
  }
  cudaEvent_t fork, join[4];
  CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  for (auto& e : join) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  std::printf("grouped GEMM kernel available: %s\n", mgt::cuda::grouped_gemm_hopper_available() ? "yes" : "no");

  bool ok = true;
  using Case = std::tuple<std::vector<int64_t>, int64_t, int64_t>;
  // Rows and sizes in multiples of 16 (cuBLASLt's FP8 GEMMs need them), tiles left part-filled.
  for (const auto& [rows, in, out] : {Case{{0, 16, 112, 128, 304, 1008}, 208, 272}, Case{{144, 16, 0, 64}, 64, 528},
                                      Case{{3008, 16}, 1040, 128}, Case{std::vector<int64_t>(40, 48), 80, 96}}) {
    for (Kind k : {Kind::kForward, Kind::kInput, Kind::kWeight, Kind::kWeightWrite}) {
      const std::vector<Problem> ps = make(k, rows, in, out);
      std::vector<LtGemm> plans;
      for (const Problem& p : ps) plans.push_back(p.m > 0 && p.n > 0 && p.k > 0 ? plan(k, p) : LtGemm{});
      const double e = check(k, ps, plans, s);
      const double bound = f32_out(k) ? 1e-5 : 1e-2;
      const bool pass = e >= 0 && e < bound;
      ok = ok && pass;
      std::printf("check %-20s groups %zu in %lld out %lld: max |diff| / max |cuBLASLt| %.2e (bound %.0e) %s\n",
                  name(k), rows.size(), (long long)in, (long long)out, e, bound, pass ? "ok" : "FAILED");
    }
  }

  std::printf("\n| projection | GEMM | grouped kernel ms (TFLOP/s) | cuBLASLt one stream ms (TFLOP/s) | cuBLASLt 4 streams ms (TFLOP/s) | grouped / best cuBLASLt speed |\n|---|---|---|---|---|---|\n");
  const std::vector<int64_t> rows = {1104, 960, 1024, 992, 1056, 1008, 992, 1088};
  int64_t total = 0;
  for (int64_t r : rows) total += r;
  for (auto [in, out, label] : {std::tuple<int64_t, int64_t, const char*>{2048, 11264, "fc1"}, {5632, 2048, "fc2"}}) {
    for (Kind k : {Kind::kForward, Kind::kInput, Kind::kWeight}) {
      const std::vector<Problem> ps = make(k, rows, in, out);
      std::vector<LtGemm> plans;
      for (const Problem& p : ps) plans.push_back(plan(k, p));
      const double flops = 2.0 * total * in * out;
      const float tg = time_ms(s, [&] { CK(!grouped(k, ps, s)); });
      const float t1 = time_ms(s, [&] { per_group(k, ps, plans, {s}); });
      const float t4 = time_ms(s, [&] {
        CK(cudaEventRecord(fork, s));
        for (int i = 1; i < 4; ++i) CK(cudaStreamWaitEvent(four[i], fork));
        per_group(k, ps, plans, four);
        for (int i = 1; i < 4; ++i) {
          CK(cudaEventRecord(join[i], four[i]));
          CK(cudaStreamWaitEvent(s, join[i]));
        }
      });
      std::printf("| %s | %s | %.3f (%.0f) | %.3f (%.0f) | %.3f (%.0f) | %.3f |\n", label, name(k), tg,
                  flops / tg / 1e9, t1, flops / t1 / 1e9, t4, flops / t4 / 1e9, std::min(t1, t4) / tg);
    }
  }
  CK(cudaDeviceSynchronize());
  std::printf("%s\n", ok ? "all checks passed" : "SOME CHECKS FAILED");
  return ok ? 0 : 1;
}
