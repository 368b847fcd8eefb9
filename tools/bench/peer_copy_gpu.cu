// What moving bytes between two GPUs of one machine costs, and what it costs the GEMMs beside it:
// the copy engines pulling (the reader's stream copies from the peer) and pushing (the writer's
// stream copies to the peer), one or both directions at once, in one or several copies; and 33
// bf16 GEMMs [8192 x 2048] x [2048 x 8192] on GPU 0 alone and beside each kind of traffic.
// One process, both GPUs (peer access), so that the figures hold without CUDA IPC's set-up.
//   nvcc -O2 -arch=sm_90 -o peer_copy_gpu tools/bench/peer_copy_gpu.cu -lcublas
//   ./peer_copy_gpu [MiB per copy, default 256]
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CHECK(x)                                                                               \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

namespace {

struct Gpu {
  int device;
  cudaStream_t stream;
  void* a;  // copy source
  void* b;  // copy destination
};

float elapsed_ms(cudaEvent_t begin, cudaEvent_t end) {
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, begin, end));
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t bytes = static_cast<size_t>(argc > 1 ? std::atoi(argv[1]) : 256) << 20;
  int can01 = 0, can10 = 0;
  CHECK(cudaDeviceCanAccessPeer(&can01, 0, 1));
  CHECK(cudaDeviceCanAccessPeer(&can10, 1, 0));
  std::printf("peer access 0->1 %d, 1->0 %d; %zu MiB per copy\n", can01, can10, bytes >> 20);
  Gpu g[2];
  for (int d = 0; d < 2; ++d) {
    g[d].device = d;
    CHECK(cudaSetDevice(d));
    CHECK(cudaDeviceEnablePeerAccess(1 - d, 0));
    CHECK(cudaStreamCreateWithFlags(&g[d].stream, cudaStreamNonBlocking));
    CHECK(cudaMalloc(&g[d].a, bytes));
    CHECK(cudaMalloc(&g[d].b, bytes));
    CHECK(cudaMemset(g[d].a, 1, bytes));
    CHECK(cudaMemset(g[d].b, 0, bytes));
  }
  // Traffic patterns, each queued `repeat` times on the streams named.
  struct Pattern {
    const char* name;
    std::function<void()> queue;
  };
  const auto copy = [&](int on, void* dst, const void* src, size_t n, int pieces = 1) {
    CHECK(cudaSetDevice(on));
    for (int p = 0; p < pieces; ++p)
      CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + p * (n / pieces), static_cast<const char*>(src) + p * (n / pieces),
                            n / pieces, cudaMemcpyDefault, g[on].stream));
  };
  std::vector<Pattern> patterns{
      {"pull 1->0 (GPU 0's stream)", [&] { copy(0, g[0].b, g[1].a, bytes); }},
      {"push 0->1 (GPU 0's stream)", [&] { copy(0, g[1].b, g[0].a, bytes); }},
      {"pull both ways (each its own stream)", [&] { copy(0, g[0].b, g[1].a, bytes); copy(1, g[1].b, g[0].a, bytes); }},
      {"push both ways (each its own stream)", [&] { copy(0, g[1].b, g[0].a, bytes); copy(1, g[0].b, g[1].a, bytes); }},
      {"push both ways, 32 MiB copies", [&] {
         copy(0, g[1].b, g[0].a, bytes, static_cast<int>(bytes >> 25));
         copy(1, g[0].b, g[1].a, bytes, static_cast<int>(bytes >> 25));
       }},
      {"cudaMemcpyPeerAsync both ways", [&] {
         CHECK(cudaSetDevice(0));
         CHECK(cudaMemcpyPeerAsync(g[1].b, 1, g[0].a, 0, bytes, g[0].stream));
         CHECK(cudaSetDevice(1));
         CHECK(cudaMemcpyPeerAsync(g[0].b, 0, g[1].a, 1, bytes, g[1].stream));
       }},
  };
  cudaEvent_t begin[2], end[2];
  for (int d = 0; d < 2; ++d) {
    CHECK(cudaSetDevice(d));
    CHECK(cudaEventCreate(&begin[d]));
    CHECK(cudaEventCreate(&end[d]));
  }
  const int repeat = 10;
  std::printf("%-40s %10s %12s\n", "traffic", "ms/copy", "GB/s each");
  for (const Pattern& p : patterns) {
    p.queue();  // warm-up
    for (int d = 0; d < 2; ++d) {
      CHECK(cudaSetDevice(d));
      CHECK(cudaStreamSynchronize(g[d].stream));
      CHECK(cudaEventRecord(begin[d], g[d].stream));
    }
    for (int r = 0; r < repeat; ++r) p.queue();
    float worst = 0;
    for (int d = 0; d < 2; ++d) {
      CHECK(cudaSetDevice(d));
      CHECK(cudaEventRecord(end[d], g[d].stream));
      CHECK(cudaEventSynchronize(end[d]));
      const float ms = elapsed_ms(begin[d], end[d]);
      if (ms > worst) worst = ms;
    }
    const float per = worst / repeat;
    std::printf("%-40s %10.3f %12.1f\n", p.name, per, bytes / (per * 1e-3) / 1e9);
  }

  // GEMMs on GPU 0 alone, then beside traffic kept going for their whole duration.
  CHECK(cudaSetDevice(0));
  cublasHandle_t handle;
  cublasCreate(&handle);
  cudaStream_t compute;
  CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  cublasSetStream(handle, compute);
  const int m = 8192, n = 8192, k = 2048;
  __nv_bfloat16 *x, *w, *y;
  CHECK(cudaMalloc(&x, size_t(m) * k * 2));
  CHECK(cudaMalloc(&w, size_t(k) * n * 2));
  CHECK(cudaMalloc(&y, size_t(m) * n * 2));
  CHECK(cudaMemset(x, 0, size_t(m) * k * 2));
  CHECK(cudaMemset(w, 0, size_t(k) * n * 2));
  const float one = 1.0f, zero = 0.0f;
  const auto gemms = [&] {
    for (int i = 0; i < 33; ++i)
      cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, w, CUDA_R_16BF, n, x, CUDA_R_16BF, k, &zero, y,
                   CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  cudaEvent_t gb, ge;
  CHECK(cudaEventCreate(&gb));
  CHECK(cudaEventCreate(&ge));
  const auto time_gemms = [&] {
    CHECK(cudaEventRecord(gb, compute));
    gemms();
    CHECK(cudaEventRecord(ge, compute));
    CHECK(cudaEventSynchronize(ge));
    return elapsed_ms(gb, ge);
  };
  gemms();
  time_gemms();
  const float alone = time_gemms();
  const double flops = 33.0 * 2.0 * m * n * k;
  std::printf("\n%-40s %10s %12s %10s\n", "33 GEMMs on GPU 0", "ms", "TFLOP/s", "slower");
  std::printf("%-40s %10.2f %12.0f %10s\n", "alone", alone, flops / (alone * 1e-3) / 1e12, "");
  for (const Pattern& p : patterns) {
    for (int r = 0; r < 3 * repeat; ++r) p.queue();  // well past the GEMMs' end
    const float ms = time_gemms();
    for (int d = 0; d < 2; ++d) {
      CHECK(cudaSetDevice(d));
      CHECK(cudaStreamSynchronize(g[d].stream));
    }
    CHECK(cudaSetDevice(0));
    std::printf("%-40s %10.2f %12.0f %9.1f%%\n", p.name, ms, flops / (ms * 1e-3) / 1e12, 100.0 * (ms / alone - 1));
  }
  return 0;
}
