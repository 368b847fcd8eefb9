// The grouped GEMM of lib/kernels/cuda/grouped_gemm_hopper.cu alone, against cuBLAS: the linear
// layer's three GEMMs (forward, input gradient, weight gradient into fp32) over a mixture's
// experts, first on small odd shapes (every tile edge; the largest difference from cuBLAS's
// one-GEMM-per-group result, relative to the result's largest value), then timed at a
// Mixtral-style layer's shapes (8 experts of 2,048 → 11,264 → 5,632 → 2,048 over 8,192 routed
// rows) beside cuBLAS's GEMMs one after another and side by side on four streams.
// Built on the development machine and run on the GPU machine:
//   nvcc -O3 -std=c++17 -arch=sm_90a -Ilib -o .devpack/grouped_gemm_probe tools/gpu/grouped_gemm_probe.cu \
//     lib/kernels/cuda/grouped_gemm_hopper.cu lib/kernels/cuda/cuda_check.cpp -lcublas
//   (there) source tools/gpu/devpack_env.bash; .devpack/grouped_gemm_probe
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/cuda/grouped_gemm_hopper.hpp"

using mgt::FloatType;
using mgt::cuda::GroupedGemmGroup;
using mgt::cuda::GroupedGemmShape;
using mgt::cuda::OperandMajor;

#define CK(x)                                                              \
  do {                                                                     \
    if ((x) != 0) {                                                        \
      std::printf("failed: %s at line %d\n", #x, __LINE__);                \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)

namespace {

// kWeight adds to fp32 gradients; kWeightWrite overwrites them (a step's first micro-batch).
enum class Kind { kForward, kInput, kWeight, kWeightWrite };
const char* name(Kind k) {
  return k == Kind::kForward  ? "forward"
         : k == Kind::kInput  ? "input grad"
         : k == Kind::kWeight ? "weight grad"
                              : "weight grad, written";
}
bool weight_gradient(Kind k) { return k == Kind::kWeight || k == Kind::kWeightWrite; }

struct Layer {
  std::vector<int64_t> rows;
  int64_t in, out;
  __nv_bfloat16 *x, *dy, *y, *dx;
  std::vector<__nv_bfloat16*> w;
  std::vector<float*> dw;
  int64_t total() const {
    int64_t t = 0;
    for (int64_t r : rows) t += r;
    return t;
  }
};

template <typename T>
T* device_random(int64_t n, std::mt19937& rng) {
  std::vector<T> h(n);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : h) v = T(dist(rng));
  T* d = nullptr;
  CK(cudaMalloc(&d, std::max<int64_t>(n, 1) * sizeof(T)));
  CK(cudaMemcpy(d, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

Layer make_layer(std::vector<int64_t> rows, int64_t in, int64_t out, std::mt19937& rng) {
  Layer l{rows, in, out, nullptr, nullptr, nullptr, nullptr, {}, {}};
  const int64_t t = l.total();
  l.x = device_random<__nv_bfloat16>(t * in, rng);
  l.dy = device_random<__nv_bfloat16>(t * out, rng);
  l.y = device_random<__nv_bfloat16>(t * out, rng);
  l.dx = device_random<__nv_bfloat16>(t * in, rng);
  for (size_t g = 0; g < rows.size(); ++g) {
    l.w.push_back(device_random<__nv_bfloat16>(out * in, rng));
    l.dw.push_back(device_random<float>(out * in, rng));
  }
  return l;
}

// The grouped kernel: false where it refused.
bool grouped(const Layer& l, Kind kind, cudaStream_t stream) {
  std::vector<GroupedGemmGroup> gs;
  int64_t r0 = 0;
  for (size_t g = 0; g < l.rows.size(); ++g) {
    const int64_t r = l.rows[g];
    GroupedGemmGroup G;
    if (kind == Kind::kForward) {
      G = {l.x + r0 * l.in, l.in, l.w[g], l.in, l.y + r0 * l.out, l.out, r, l.out, l.in};
    } else if (kind == Kind::kInput) {
      G = {l.dy + r0 * l.out, l.out, l.w[g], l.in, l.dx + r0 * l.in, l.in, r, l.in, l.out};
    } else {
      G = {l.dy + r0 * l.out, l.out, l.x + r0 * l.in, l.in, l.dw[g], l.in, l.out, l.in, r};
    }
    gs.push_back(G);
    r0 += r;
  }
  GroupedGemmShape shape;
  const bool weight = weight_gradient(kind);
  shape.a_major = weight ? OperandMajor::kMN : OperandMajor::kK;
  shape.b_major = kind == Kind::kForward ? OperandMajor::kK : OperandMajor::kMN;
  shape.d_type = weight ? FloatType::kF32 : FloatType::kBf16;
  shape.accumulate = kind == Kind::kWeight;
  return mgt::cuda::grouped_gemm_hopper(shape, gs.data(), gs.size(), FloatType::kBf16, stream);
}

// cuBLAS, one GEMM per group, group g on streams[g % streams.size()].
void per_group(cublasHandle_t h, const Layer& l, Kind kind, const std::vector<cudaStream_t>& streams) {
  const float one = 1.0f, zero = 0.0f;
  int64_t r0 = 0;
  for (size_t g = 0; g < l.rows.size(); ++g) {
    const int r = static_cast<int>(l.rows[g]), in = static_cast<int>(l.in), out = static_cast<int>(l.out);
    CK(cublasSetStream(h, streams[g % streams.size()]));
    if (r > 0) {
      if (kind == Kind::kForward)
        CK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, out, r, in, &one, l.w[g], CUDA_R_16BF, in, l.x + r0 * in,
                        CUDA_R_16BF, in, &zero, l.y + r0 * out, CUDA_R_16BF, out, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
      else if (kind == Kind::kInput)
        CK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, in, r, out, &one, l.w[g], CUDA_R_16BF, in, l.dy + r0 * out,
                        CUDA_R_16BF, out, &zero, l.dx + r0 * in, CUDA_R_16BF, in, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
      else
        CK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, in, out, r, &one, l.x + r0 * in, CUDA_R_16BF, in,
                        l.dy + r0 * out, CUDA_R_16BF, out, kind == Kind::kWeight ? &one : &zero, l.dw[g], CUDA_R_32F,
                        in, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
    r0 += r;
  }
  CK(cublasSetStream(h, streams[0]));
}

std::vector<float> read(const void* p, int64_t n, bool f32) {
  std::vector<float> out(n);
  if (f32) {
    CK(cudaMemcpy(out.data(), p, n * 4, cudaMemcpyDeviceToHost));
  } else {
    std::vector<__nv_bfloat16> h(n);
    CK(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost));
    for (int64_t i = 0; i < n; ++i) out[i] = __bfloat162float(h[i]);
  }
  return out;
}

// The result of `kind` (every group's output) as floats.
std::vector<float> result(const Layer& l, Kind kind) {
  if (kind == Kind::kForward) return read(l.y, l.total() * l.out, false);
  if (kind == Kind::kInput) return read(l.dx, l.total() * l.in, false);
  std::vector<float> all;
  for (float* d : l.dw) {
    const auto v = read(d, l.out * l.in, true);
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

void restore_dw(const Layer& l, const std::vector<float>& saved) {
  for (size_t g = 0; g < l.dw.size(); ++g)
    CK(cudaMemcpy(l.dw[g], saved.data() + g * l.out * l.in, l.out * l.in * 4, cudaMemcpyHostToDevice));
}

double check(cublasHandle_t h, const Layer& l, Kind kind, cudaStream_t s) {
  const bool weight = weight_gradient(kind);
  const std::vector<float> start = weight ? result(l, kind) : std::vector<float>();
  per_group(h, l, kind, {s});
  CK(cudaStreamSynchronize(s));
  const std::vector<float> want = result(l, kind);
  // The grouped kernel's output starts as NaN (forward, input gradient) or as cuBLAS's started.
  if (weight) restore_dw(l, start);
  if (kind == Kind::kForward) CK(cudaMemset(l.y, 0xff, l.total() * l.out * 2));
  if (kind == Kind::kInput) CK(cudaMemset(l.dx, 0xff, l.total() * l.in * 2));
  if (!grouped(l, kind, s)) return -1.0;
  CK(cudaStreamSynchronize(s));
  CK(cudaGetLastError());
  const std::vector<float> got = result(l, kind);
  double err = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i])) return 1.0;
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
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
  cublasHandle_t h;
  CK(cublasCreate(&h));
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
  std::mt19937 rng(7);
  std::printf("grouped GEMM kernel available: %s\n", mgt::cuda::grouped_gemm_hopper_available() ? "yes" : "no");

  bool ok = true;
  struct Case {
    std::vector<int64_t> rows;
    int64_t in, out;
  };
  const std::vector<Case> cases = {{{0, 1, 77, 128, 300, 1000}, 200, 264},
                                   {{129, 5, 0, 64}, 64, 520},
                                   {{3000, 17}, 1032, 128},
                                   {std::vector<int64_t>(40, 33), 72, 96}};
  for (const Case& c : cases) {
    Layer l = make_layer(c.rows, c.in, c.out, rng);
    for (Kind k : {Kind::kForward, Kind::kInput, Kind::kWeight}) {
      const double e = check(h, l, k, s);
      const double bound = k == Kind::kWeight ? 1e-5 : 1e-2;
      const bool pass = e >= 0 && e < bound;
      ok = ok && pass;
      std::printf("check %-11s groups %zu in %lld out %lld: max |diff| / max |cuBLAS| %.2e (bound %.0e) %s\n",
                  name(k), c.rows.size(), (long long)c.in, (long long)c.out, e, bound, pass ? "ok" : "FAILED");
    }
  }

  std::printf("\n| projection | GEMM | grouped kernel ms (TFLOP/s) | cuBLAS one stream ms (TFLOP/s) | cuBLAS 4 streams ms (TFLOP/s) | grouped / best cuBLAS speed |\n|---|---|---|---|---|---|\n");
  const std::vector<int64_t> rows = {1100, 950, 1020, 980, 1060, 1003, 990, 1089};
  for (auto [in, out, label] : {std::tuple<int64_t, int64_t, const char*>{2048, 11264, "fc1"}, {5632, 2048, "fc2"}}) {
    Layer l = make_layer(rows, in, out, rng);
    for (Kind k : {Kind::kForward, Kind::kInput, Kind::kWeight}) {
      const double flops = 2.0 * l.total() * in * out;
      const float tg = time_ms(s, [&] { grouped(l, k, s); });
      const float t1 = time_ms(s, [&] { per_group(h, l, k, {s}); });
      const float t4 = time_ms(s, [&] {
        CK(cudaEventRecord(fork, s));
        for (int i = 1; i < 4; ++i) CK(cudaStreamWaitEvent(four[i], fork));
        per_group(h, l, k, four);
        for (int i = 1; i < 4; ++i) {
          CK(cudaEventRecord(join[i], four[i]));
          CK(cudaStreamWaitEvent(s, join[i]));
        }
      });
      std::printf("| %s | %s | %.3f (%.0f) | %.3f (%.0f) | %.3f (%.0f) | %.3f |\n", label, name(k), tg,
                  flops / tg / 1e9, t1, flops / t1 / 1e9, t4, flops / t4 / 1e9, std::min(t1, t4) / tg);
    }
  }
  // One group: a dense model's linear layers (GPT 1.3B at micro-batch 4, GPT-2 124M at 32).
  std::printf("\n| dense layer | rows | GEMM | kernel ms (TFLOP/s) | cuBLAS ms (TFLOP/s) | kernel / cuBLAS speed | difference |\n|---|---|---|---|---|---|---|\n");
  using Dense = std::tuple<const char*, int64_t, int64_t, int64_t>;
  for (const auto& [label, rows_, in, out] :
       {Dense{"1.3B qkv", 8192, 2048, 6144}, Dense{"1.3B proj", 8192, 2048, 2048}, Dense{"1.3B fc1", 8192, 2048, 8192},
        Dense{"1.3B fc2", 8192, 8192, 2048}, Dense{"124M qkv", 32768, 768, 2304}, Dense{"124M proj", 32768, 768, 768},
        Dense{"124M fc1", 32768, 768, 3072}, Dense{"124M fc2", 32768, 3072, 768}, Dense{"long k", 32768, 4096, 4096}}) {
    Layer l = make_layer({rows_}, in, out, rng);
    for (Kind k : {Kind::kForward, Kind::kInput, Kind::kWeight, Kind::kWeightWrite}) {
      const double e = check(h, l, k, s);
      const double flops = 2.0 * rows_ * in * out;
      if (e < 0) {  // refused: cuBLAS's
        std::printf("| %s | %lld | %s | refused | | | |\n", label, (long long)rows_, name(k));
        continue;
      }
      const bool pass = e < (k == Kind::kForward || k == Kind::kInput ? 1e-2 : 1e-5);
      ok = ok && pass;
      const float tg = time_ms(s, [&] { grouped(l, k, s); });
      const float t1 = time_ms(s, [&] { per_group(h, l, k, {s}); });
      std::printf("| %s | %lld | %s | %.3f (%.0f) | %.3f (%.0f) | %.3f | %.1e%s |\n", label, (long long)rows_, name(k),
                  tg, flops / tg / 1e9, t1, flops / t1 / 1e9, t1 / tg, e, pass ? "" : " (CHECK FAILED)");
    }
  }
  CK(cudaDeviceSynchronize());
  std::printf("%s\n", ok ? "all checks passed" : "SOME CHECKS FAILED");
  return ok ? 0 : 1;
}
