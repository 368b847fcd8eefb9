#include "kernels/cuda/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/launch.cuh"

namespace mgt::cuda {
namespace {

// A fixed grid, so the partial sums (and hence the rounding) never depend on the device.
constexpr int kSumBlocks = 1024;
constexpr int kSumThreads = 256;

__global__ void adamw_kernel(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                             int64_t n, AdamWParams p, float correction1,
                             float correction2) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = grad[i];
    const float m = p.beta1 * exp_avg[i] + (1.0f - p.beta1) * g;
    const float v = p.beta2 * exp_avg_sq[i] + (1.0f - p.beta2) * g * g;
    const float m_hat = m / correction1;
    const float v_hat = v / correction2;
    const float update = m_hat / (sqrtf(v_hat) + p.eps) + p.weight_decay * param[i];
    param[i] -= p.lr * update;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

// One element of adamw_update: adamw_kernel's arithmetic on a gradient scaled as it is read.
__device__ __forceinline__ float adam_element(float& param, float grad, float& m, float& v,
                                              const AdamWParams& p, float lr,
                                              float weight_decay, float grad_scale,
                                              float correction1, float correction2) {
  const float g = grad * grad_scale;
  m = p.beta1 * m + (1.0f - p.beta1) * g;
  v = p.beta2 * v + (1.0f - p.beta2) * g * g;
  const float m_hat = m / correction1;
  const float v_hat = v / correction2;
  const float update = m_hat / (sqrtf(v_hat) + p.eps) + weight_decay * param;
  param = param - lr * update;
  return param;
}

// The first run containing element i (runs end at ends[0…segments)).
__device__ __forceinline__ int64_t find_run(const int64_t* ends, int64_t segments, int64_t i) {
  int64_t lo = 0;
  int64_t hi = segments - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (ends[mid] <= i) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// Four consecutive elements of a moment, fp32 (16 bytes) or bf16 (8 bytes, read into fp32 and
// stored rounded to nearest even: the precision-aware optimizer's states).
__device__ __forceinline__ float4 load4(Out x, int64_t q) {
  if (!x.narrow()) return static_cast<const float4*>(x.raw())[q];
  const uint2 packed = static_cast<const uint2*>(x.raw())[q];
  const auto* h = reinterpret_cast<const unsigned short*>(&packed);
  return make_float4(narrow_to_float(h[0], x.bf16()), narrow_to_float(h[1], x.bf16()),
                     narrow_to_float(h[2], x.bf16()), narrow_to_float(h[3], x.bf16()));
}

__device__ __forceinline__ void store4(Out x, int64_t q, const float4& v) {
  if (!x.narrow()) {
    static_cast<float4*>(x.raw())[q] = v;
    return;
  }
  uint2 packed;
  auto* h = reinterpret_cast<unsigned short*>(&packed);
  h[0] = float_to_narrow(v.x, x.bf16());
  h[1] = float_to_narrow(v.y, x.bf16());
  h[2] = float_to_narrow(v.z, x.bf16());
  h[3] = float_to_narrow(v.w, x.bf16());
  static_cast<uint2*>(x.raw())[q] = packed;
}

// The whole buffer in one launch (run flags: 1 weight decay, 2 the decoupled learning rate, as
// kAdamWDecay and kAdamWDecoupledLr of kernels/backend.hpp), four elements per thread and step
// through 16-byte accesses (8-byte for a 2-byte compute copy, where compute_packed, and for bf16
// moments) when the pointers are aligned to them, else one at a time (the last n % 4 elements
// by the first threads). Each thread walks its elements in increasing order, so finding each
// element's run costs a comparison.
__global__ void adamw_update_kernel(float* param, const float* grad, Out exp_avg,
                                    Out exp_avg_sq, int64_t n, const int64_t* ends,
                                    const int64_t* flags, int64_t segments, AdamWParams p,
                                    float decoupled_lr, float grad_scale, float correction1,
                                    float correction2, Out compute, bool vectorized,
                                    bool compute_packed) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t vectors = vectorized ? n / 4 : 0;
  int64_t seg = find_run(ends, segments, first * 4);
  for (int64_t q = first; q < vectors; q += stride) {
    float4 w = reinterpret_cast<float4*>(param)[q];
    const float4 g = reinterpret_cast<const float4*>(grad)[q];
    float4 m = load4(exp_avg, q);
    float4 v = load4(exp_avg_sq, q);
    float* wp = &w.x;
    const float* gp = &g.x;
    float* mp = &m.x;
    float* vp = &v.x;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t i = q * 4 + j;
      while (ends[seg] <= i) ++seg;
      const int64_t f = flags[seg];
      adam_element(wp[j], gp[j], mp[j], vp[j], p, (f & 2) != 0 ? decoupled_lr : p.lr,
                   (f & 1) != 0 ? p.weight_decay : 0.0f, grad_scale, correction1, correction2);
    }
    reinterpret_cast<float4*>(param)[q] = w;
    store4(exp_avg, q, m);
    store4(exp_avg_sq, q, v);
    // The compute copy's four elements in one store: four 2-byte stores a thread left each warp's
    // writes in partial sectors (the whole update at 1.3B on an H200: 3.67 TB/s, now 3.91).
    if (compute == nullptr) continue;
    if (!compute_packed) {
#pragma unroll
      for (int j = 0; j < 4; ++j) compute[q * 4 + j] = wp[j];
    } else if (compute.narrow()) {
      uint2 packed;
      auto* h = reinterpret_cast<unsigned short*>(&packed);
#pragma unroll
      for (int j = 0; j < 4; ++j) h[j] = float_to_narrow(wp[j], compute.bf16());
      static_cast<uint2*>(compute.raw())[q] = packed;
    } else {
      static_cast<float4*>(compute.raw())[q] = w;
    }
  }
  for (int64_t i = vectors * 4 + first; i < n; i += stride) {
    const int64_t f = flags[find_run(ends, segments, i)];
    float m = exp_avg[i], v = exp_avg_sq[i];
    const float updated = adam_element(param[i], grad[i], m, v, p, (f & 2) != 0 ? decoupled_lr : p.lr,
                                       (f & 1) != 0 ? p.weight_decay : 0.0f, grad_scale,
                                       correction1, correction2);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    if (compute != nullptr) compute[i] = updated;
  }
}

__device__ __forceinline__ double block_sum_double(double v, double* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  double total = 0.0;
  if (threadIdx.x == 0) {
    for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) total += scratch[w];
  }
  return total;
}

__global__ void sum_squares_partial_kernel(const float* x, int64_t n, double* partial) {
  __shared__ double scratch[32];
  double acc = 0.0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = x[i];
    acc += v * v;
  }
  const double total = block_sum_double(acc, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

// The ranges travel as the kernel's argument (2 KiB), one per blockIdx.y; each range's blocks
// stride as sum_squares_partial_kernel's do, so that its partial sums are the same.
constexpr int kRangesPerLaunch = 128;

struct RangeBatch {
  ElementRange ranges[kRangesPerLaunch];
};

__global__ void sum_squares_ranges_partial_kernel(const float* x, RangeBatch batch, double* partial) {
  __shared__ double scratch[32];
  const ElementRange r = batch.ranges[blockIdx.y];
  double acc = 0.0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < r.count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = x[r.begin + i];
    acc += v * v;
  }
  const double total = block_sum_double(acc, scratch);
  if (threadIdx.x == 0) partial[blockIdx.y * static_cast<int64_t>(gridDim.x) + blockIdx.x] = total;
}

// One block per range: its kSumBlocks partial sums into sums[range].
__global__ void sum_range_partials_kernel(const double* partial, double* sums) {
  __shared__ double scratch[32];
  const double* mine = partial + static_cast<int64_t>(blockIdx.x) * kSumBlocks;
  double acc = 0.0;
  for (int i = threadIdx.x; i < kSumBlocks; i += blockDim.x) acc += mine[i];
  const double total = block_sum_double(acc, scratch);
  if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

// The ranges' sums added one after another, as the host would.
__global__ void sum_in_order_kernel(const double* sums, int64_t n, double* result) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += sums[i];
  *result = acc;
}

__global__ void sum_partials_kernel(const double* partial, int count, double* result) {
  __shared__ double scratch[32];
  double acc = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
  const double total = block_sum_double(acc, scratch);
  if (threadIdx.x == 0) *result = total;
}

}  // namespace

void adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                const AdamWParams& params, int64_t step, cudaStream_t stream) {
  if (n == 0) return;
  const auto t = static_cast<double>(step);
  const auto correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(params.beta1), t));
  const auto correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(params.beta2), t));
  adamw_kernel<<<grid_for(n), kThreads, 0, stream>>>(param, grad, exp_avg, exp_avg_sq, n, params,
                                                     correction1, correction2);
  MGT_CUDA_CHECK_LAUNCH(adamw_kernel);
}

void adamw_update(float* param, const float* grad, Out exp_avg, Out exp_avg_sq, int64_t n,
                  const int64_t* segment_ends, const int64_t* segment_flags, int64_t segments,
                  const AdamWParams& params, float decoupled_lr, float grad_scale,
                  int64_t step, Out compute, cudaStream_t stream) {
  if (n == 0) return;
  const auto t = static_cast<double>(step);
  const auto correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(params.beta1), t));
  const auto correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(params.beta2), t));
  bool vectorized = aligned16(param) && aligned16(grad);
  for (const Out& moment : {exp_avg, exp_avg_sq})
    vectorized = vectorized && reinterpret_cast<uintptr_t>(moment.raw()) % (moment.narrow() ? 8 : 16) == 0;
  const auto address = reinterpret_cast<uintptr_t>(compute.raw());
  const bool compute_packed = address % (compute.narrow() ? 8 : 16) == 0;
  // As many blocks as the GPU holds at once, each striding over the buffer, so that a sweep of
  // the grid reads consecutive memory. A block per 256 elements (up to 65535·4 blocks, each
  // striding by a gigabyte) ran the update at 3.4 TB/s on an H200 at 1.3B parameters and at
  // 2.9 TB/s at half of them (BENCHMARKS.md).
  static const unsigned resident = [] {
    int device = 0, multiprocessors = 0, per_multiprocessor = 0;
    MGT_CUDA_CHECK(cudaGetDevice(&device));
    MGT_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
    MGT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, adamw_update_kernel,
                                                                 kThreads, 0));
    return static_cast<unsigned>(std::max(1, multiprocessors * per_multiprocessor));
  }();
  const unsigned blocks = std::min(grid_for(vectorized ? (n + 3) / 4 : n), resident);
  adamw_update_kernel<<<blocks, kThreads, 0, stream>>>(
      param, grad, exp_avg, exp_avg_sq, n, segment_ends, segment_flags, segments, params,
      decoupled_lr, grad_scale, correction1, correction2, compute, vectorized, compute_packed);
  MGT_CUDA_CHECK_LAUNCH(adamw_update_kernel);
}

void sum_of_squares(const float* x, int64_t n, double* result, cudaStream_t stream) {
  double* partial = nullptr;
  MGT_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&partial), kSumBlocks * sizeof(double),
                                 stream));
  sum_squares_partial_kernel<<<kSumBlocks, kSumThreads, 0, stream>>>(x, n, partial);
  MGT_CUDA_CHECK_LAUNCH(sum_squares_partial_kernel);
  sum_partials_kernel<<<1, kSumThreads, 0, stream>>>(partial, kSumBlocks, result);
  MGT_CUDA_CHECK_LAUNCH(sum_partials_kernel);
  MGT_CUDA_CHECK(cudaFreeAsync(partial, stream));
}

void sum_of_squares(const float* x, const ElementRange* ranges, std::size_t n, double* result,
                    cudaStream_t stream) {
  double* scratch = nullptr;
  const auto count = static_cast<int64_t>(n);
  MGT_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&scratch),
                                 static_cast<std::size_t>(count * (kSumBlocks + 1)) * sizeof(double), stream));
  double* sums = scratch;
  double* partial = scratch + count;
  for (int64_t first = 0; first < count; first += kRangesPerLaunch) {
    const int64_t batch_size = std::min<int64_t>(kRangesPerLaunch, count - first);
    RangeBatch batch{};
    for (int64_t i = 0; i < batch_size; ++i) batch.ranges[i] = ranges[first + i];
    const dim3 grid(kSumBlocks, static_cast<unsigned>(batch_size));
    sum_squares_ranges_partial_kernel<<<grid, kSumThreads, 0, stream>>>(x, batch, partial + first * kSumBlocks);
    MGT_CUDA_CHECK_LAUNCH(sum_squares_ranges_partial_kernel);
  }
  sum_range_partials_kernel<<<static_cast<unsigned>(count), kSumThreads, 0, stream>>>(partial, sums);
  MGT_CUDA_CHECK_LAUNCH(sum_range_partials_kernel);
  sum_in_order_kernel<<<1, 1, 0, stream>>>(sums, count, result);
  MGT_CUDA_CHECK_LAUNCH(sum_in_order_kernel);
  MGT_CUDA_CHECK(cudaFreeAsync(scratch, stream));
}

}  // namespace mgt::cuda
