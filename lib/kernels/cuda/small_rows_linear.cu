#include "kernels/cuda/small_rows_linear.hpp"

#include "kernels/cuda/gelu.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vector8.cuh"

namespace mgt::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
// Vectors of W each lane loads before it multiplies: loads in flight hide the memory latency.
constexpr int kUnroll = 4;
// Warps the grid should hold to keep every SM's memory pipe busy (132 SMs, several each).
constexpr int64_t kWantedWarps = 4096;

// Eight elements of x and W, both of type T, whose decode is compiled in: in this loop, which
// reads every weight once per token, a conversion chosen at run time costs a tenth of the rate.
template <FloatType T>
__device__ __forceinline__ void load8_as(In p, int64_t v, float (&out)[8]) {
  if constexpr (T == FloatType::kF32) {
    const float4* f = static_cast<const float4*>(p.raw()) + 2 * v;
    const float4 a = f[0];
    const float4 b = f[1];
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
  } else {
    const uint4 w = static_cast<const uint4*>(p.raw())[v];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float2 f;
      if constexpr (T == FloatType::kBf16) f = __bfloat1622float2(reinterpret_cast<const __nv_bfloat162*>(&w)[j]);
      else f = __half22float2(reinterpret_cast<const __half2*>(&w)[j]);
      out[2 * j] = f.x;
      out[2 * j + 1] = f.y;
    }
  }
}

// Each output o is computed by `split` warps of one block, each over every split-th stretch of
// 32 vectors of W's row; their sums meet in shared memory. Launched early: the first vectors of W
// are loaded while the kernel that writes x still runs.
template <FloatType T>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    small_rows_linear_kernel(In x, In w, In bias, int rows, int64_t in, int64_t out, int split, Out pre, Out y) {
  __shared__ float partial[kWarpsPerBlock][kSmallRowsMax];
  let_next_kernel_start();
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * (kWarpsPerBlock / split) + warp / split;
  const int part = warp % split;
  const int64_t vectors = o < out ? in / 8 : 0;
  const In w_row = w + (o < out ? o : 0) * in;
  const int64_t stride = 32LL * split;
  float wv[kUnroll][8];
  const auto load_w = [&](int64_t v0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (v0 + u * stride < vectors) load8_as<T>(w_row, v0 + u * stride, wv[u]);
  };
  const int64_t first = part * 32LL + lane;
  load_w(first);
  wait_for_previous_kernels();
  float acc[kSmallRowsMax] = {};
  for (int64_t v0 = first; v0 < vectors; v0 += stride * kUnroll) {
    if (v0 != first) load_w(v0);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (v0 + u * stride >= vectors) break;
#pragma unroll
      for (int r = 0; r < kSmallRowsMax; ++r) {
        if (r >= rows) break;
        float xv[8];
        load8_as<T>(x + r * in, v0 + u * stride, xv);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[r] += xv[j] * wv[u][j];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kSmallRowsMax; ++r) {
    if (r >= rows) break;
    const float sum = warp_sum(acc[r]);
    if (lane == 0) partial[warp][r] = sum;
  }
  __syncthreads();
  // The first warp of each output adds its split's partial sums in a fixed order.
  if (o >= out || part != 0 || lane >= rows) return;
  float sum = 0.0f;
  for (int p = 0; p < split; ++p) sum += partial[warp + p][lane];
  const float value = sum + (bias != nullptr ? bias[o] : 0.0f);
  if (pre == nullptr) {
    y[lane * out + o] = value;
  } else {
    pre[lane * out + o] = value;
    y[lane * out + o] = gelu_tanh(pre[lane * out + o]);
  }
}

}  // namespace

bool small_rows_linear(In x, In w, In bias, int64_t rows, int64_t in, int64_t out, Out pre, Out y,
                       cudaStream_t stream) {
  if (rows < 1 || rows > kSmallRowsMax || x.type() != w.type() || !vectorizable(in, {x.raw(), w.raw()})) return false;
  if (out == 0) return true;
  // Few outputs (a projection back to the hidden size) share each row of W among more warps.
  int split = 1;
  while (split < kWarpsPerBlock && out * split < kWantedWarps && in / 8 >= 32LL * split * 2) split *= 2;
  const int64_t per_block = kWarpsPerBlock / split;
  const auto blocks = static_cast<unsigned>((out + per_block - 1) / per_block);
  const auto launch = [&](auto kernel) {
    launch_early(kernel, blocks, kWarpsPerBlock * 32, stream, x, w, bias, static_cast<int>(rows), in, out, split, pre, y);
  };
  switch (w.type()) {
    case FloatType::kF32: launch(small_rows_linear_kernel<FloatType::kF32>); break;
    case FloatType::kBf16: launch(small_rows_linear_kernel<FloatType::kBf16>); break;
    case FloatType::kF16: launch(small_rows_linear_kernel<FloatType::kF16>); break;
  }
  return true;
}

}  // namespace mgt::cuda
