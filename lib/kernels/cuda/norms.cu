#include "kernels/cuda/norms.hpp"

#include <algorithm>

#include "kernels/cuda/fp8_encode.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vector8.cuh"

namespace mgt::cuda {
namespace {

constexpr int kRowThreads = 256;
// Rows per block of the first stage of a column reduction.
constexpr int kRowsPerChunk = 256;

__global__ void layer_norm_forward_kernel(In x, In weight, In bias,
                                          int64_t hidden, float eps, Out y, float* mean,
                                          float* rstd) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  In xr = x + r * hidden;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) sum += xr[i];
  const float mu = block_sum(sum, scratch) / static_cast<float>(hidden);
  // Two passes: E[x²] − E[x]² cancels badly when |mean| ≫ std.
  float sq = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float d = xr[i] - mu;
    sq += d * d;
  }
  const float inv = rsqrtf(block_sum(sq, scratch) / static_cast<float>(hidden) + eps);
  Out yr = y + r * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    yr[i] = (xr[i] - mu) * inv * weight[i] + (bias != nullptr ? bias[i] : 0.0f);
  }
  if (threadIdx.x == 0) {
    mean[r] = mu;
    rstd[r] = inv;
  }
}

// mean == nullptr: RMSNorm (no centring).
__global__ void norm_backward_input_kernel(In dy, In x, In weight,
                                           const float* mean, const float* rstd, int64_t hidden,
                                           Out dx, bool accumulate) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  In xr = x + r * hidden;
  In dyr = dy + r * hidden;
  const float mu = mean != nullptr ? mean[r] : 0.0f;
  const float inv = rstd[r];
  float sum_g = 0.0f;
  float sum_g_xhat = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float g = dyr[i] * weight[i];
    sum_g += g;
    sum_g_xhat += g * (xr[i] - mu) * inv;
  }
  const float mean_g = mean != nullptr ? block_sum(sum_g, scratch) / static_cast<float>(hidden) : 0.0f;
  const float mean_g_xhat = block_sum(sum_g_xhat, scratch) / static_cast<float>(hidden);
  Out dxr = dx + r * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float xhat = (xr[i] - mu) * inv;
    const float g = inv * (dyr[i] * weight[i] - mean_g - xhat * mean_g_xhat);
    dxr[i] = accumulate ? static_cast<float>(dxr[i]) + g : g;
  }
}

__global__ void rms_norm_forward_kernel(In x, In weight, int64_t hidden,
                                        float eps, Out y, float* rstd) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  In xr = x + r * hidden;
  float sq = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) sq += xr[i] * xr[i];
  const float inv = rsqrtf(block_sum(sq, scratch) / static_cast<float>(hidden) + eps);
  Out yr = y + r * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) yr[i] = xr[i] * inv * weight[i];
  if (threadIdx.x == 0) rstd[r] = inv;
}

// What a column reduction sums at (r, c).
enum class ColumnTerm { kValue, kValueTimesXhat };

// Stage 1: partial[chunk, c] = Σ over the chunk's rows. Block (32, 8): x picks the column,
// y strides the rows; the 8 partial sums are combined in a fixed order.
__global__ void column_partial_kernel(In dy, In x, const float* mean,
                                      const float* rstd, ColumnTerm term, int64_t rows,
                                      int64_t cols, float* partial) {
  __shared__ float sums[8][33];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * kRowsPerChunk;
  const int64_t last = min(first + kRowsPerChunk, rows);
  float acc = 0.0f;
  if (c < cols) {
    for (int64_t r = first + threadIdx.y; r < last; r += 8) {
      float v = dy[r * cols + c];
      if (term == ColumnTerm::kValueTimesXhat) {
        v *= (x[r * cols + c] - (mean != nullptr ? mean[r] : 0.0f)) * rstd[r];
      }
      acc += v;
    }
  }
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
    for (int k = 0; k < 8; ++k) total += sums[k][threadIdx.x];
    partial[static_cast<int64_t>(blockIdx.y) * cols + c] = total;
  }
}

// Stage 2: out[c] += Σ_chunk partial[chunk, c], chunks in order (= without `accumulate`).
__global__ void column_finish_kernel(const float* partial, int64_t chunks, int64_t cols,
                                     float* out, bool accumulate) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < cols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float total = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) total += partial[k * cols + c];
    out[c] = accumulate ? out[c] + total : total;
  }
}

void column_sums(In dy, In x, const float* mean, const float* rstd,
                 ColumnTerm term, int64_t rows, int64_t cols, float* out, bool accumulate, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  const int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  float* partial = nullptr;
  MGT_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&partial),
                                 static_cast<size_t>(chunks * cols) * sizeof(float), stream));
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(chunks));
  column_partial_kernel<<<grid, dim3(32, 8), 0, stream>>>(dy, x, mean, rstd, term, rows, cols,
                                                          partial);
  MGT_CUDA_CHECK_LAUNCH(column_partial_kernel);
  column_finish_kernel<<<grid_for(cols), kThreads, 0, stream>>>(partial, chunks, cols, out, accumulate);
  MGT_CUDA_CHECK_LAUNCH(column_finish_kernel);
  MGT_CUDA_CHECK(cudaFreeAsync(partial, stream));
}

// ---- Vector paths: one warp per row, eight elements per access (see vector8.cuh) ----
// Rows of a few thousand elements are re-read from L1/L2 by the later passes, so each row
// costs one read from memory; the scalar kernels above serve rows that cannot be vectorized.
constexpr int kWarpsPerBlock = kRowThreads / 32;

// Where a vector norm's output goes: stored to y (kStore), or, for the norm that writes FP8
// (fp8_norm_forward), cast instead: each value rounded to the norm input's type (narrow, bf16) as
// storing it would round it, then encoded with *scale as fp8_quantize encodes (fp8_encode.cuh),
// its max |·| folded into amax (where not null), 1/scale written to scale_inv by the grid's first
// thread, as fp8_quantize writes them.
enum class NormOutputKind { kStore, kE4M3, kE5M2 };

struct NormOutput {
  Out y;
  bool narrow = false;
  bool bf16 = false;
  const float* scale = nullptr;
  int* amax = nullptr;
  uint8_t* codes = nullptr;
  float* scale_inv = nullptr;
};

// The scale the FP8 output is cast with (read once the kernels before have finished).
template <NormOutputKind kKind>
__device__ __forceinline__ float output_scale(const NormOutput& o) {
  if constexpr (kKind == NormOutputKind::kStore) {
    return 0.0f;
  } else {
    const float scale = *o.scale;
    if (blockIdx.x == 0 && threadIdx.x == 0) *o.scale_inv = __fdiv_rn(1.0f, scale);
    return scale;
  }
}

// Eight-element group i of row r of the output.
template <NormOutputKind kKind>
__device__ __forceinline__ void write_output8(const NormOutput& o, int64_t r, int64_t hidden, int64_t i, float (&v)[8],
                                              float scale, int& amax_bits) {
  if constexpr (kKind == NormOutputKind::kStore) {
    store8(o.y + r * hidden, i, v);
  } else {
    if (o.narrow) {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = narrow_to_float(float_to_narrow(v[j], o.bf16), o.bf16);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) amax_bits = max(amax_bits, magnitude_bits(v[j]));
    *reinterpret_cast<uint2*>(o.codes + r * hidden + 8 * i) = encode8<kKind == NormOutputKind::kE5M2>(v, scale);
  }
}

// Every thread of the block calls it.
template <NormOutputKind kKind>
__device__ __forceinline__ void finish_output(const NormOutput& o, int amax_bits) {
  if constexpr (kKind != NormOutputKind::kStore) {
    if (o.amax != nullptr) record_block_amax(amax_bits, o.amax);
  }
}

// Row r of norm_forward8_kernel, one warp.
template <NormOutputKind kKind>
__device__ __forceinline__ void norm_row8(In x, In residual, In extra, In weight, In bias, int64_t r, int64_t hidden,
                                          float eps, Out sum, const NormOutput& out, float* mean, float* rstd,
                                          float scale, int& amax_bits) {
  const int lane = threadIdx.x % 32;
  const int64_t n8 = hidden / 8;
  In xr = x + r * hidden;
  float v[8];
  if (residual != nullptr) {
    const In rr = residual + r * hidden;
    const Out sr = sum + r * hidden;
    for (int64_t i = lane; i < n8; i += 32) {
      float b[8];
      load8(xr, i, v);
      load8(rr, i, b);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] += b[j];
      if (extra != nullptr) {
        load8(extra + r * hidden, i, b);
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] += b[j];
      }
      store8(sr, i, v);
    }
    xr = In(sr.raw(), sr.type());
  }
  float mu = 0.0f;
  if (mean != nullptr) {
    float sum = 0.0f;
    for (int64_t i = lane; i < n8; i += 32) {
      load8(xr, i, v);
#pragma unroll
      for (int j = 0; j < 8; ++j) sum += v[j];
    }
    mu = warp_sum(sum) / static_cast<float>(hidden);
  }
  // Two passes for LayerNorm: E[x²] − E[x]² cancels badly when |mean| ≫ std.
  float sq = 0.0f;
  for (int64_t i = lane; i < n8; i += 32) {
    load8(xr, i, v);
#pragma unroll
    for (int j = 0; j < 8; ++j) sq += (v[j] - mu) * (v[j] - mu);
  }
  const float inv = rsqrtf(warp_sum(sq) / static_cast<float>(hidden) + eps);
  for (int64_t i = lane; i < n8; i += 32) {
    float w[8], b[8] = {};
    load8(xr, i, v);
    load8(weight, i, w);
    if (bias != nullptr) load8(bias, i, b);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = (v[j] - mu) * inv * w[j] + b[j];
    write_output8<kKind>(out, r, hidden, i, v, scale, amax_bits);
  }
  if (lane == 0) {
    if (mean != nullptr) mean[r] = mu;
    rstd[r] = inv;
  }
}

// mean == nullptr: RMSNorm (no centring, no bias). With a residual, the row normalised is
// sum = x + residual (+ extra where given), written first in sum's type and read back by the
// passes below (each lane rereads the groups it wrote), so the norm sees the rounded sum, as
// after a separate add.
template <NormOutputKind kKind>
__global__ void norm_forward8_kernel(In x, In residual, In extra, In weight, In bias, int64_t rows,
                                     int64_t hidden, float eps, Out sum, NormOutput out, float* mean, float* rstd) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const float scale = output_scale<kKind>(out);
  int amax_bits = 0;
  if (r < rows) norm_row8<kKind>(x, residual, extra, weight, bias, r, hidden, eps, sum, out, mean, rstd, scale,
                                 amax_bits);
  finish_output<kKind>(out, amax_bits);
}

// The same norm for the few rows of a decode step, where one warp per row leaves the GPU idle
// and the row's passes cost a memory round trip each: one block per row, the row held in
// registers (kPerThread groups of eight per thread), one read of each operand. Launched early:
// the weight and bias are loaded while the kernel that writes x still runs.
constexpr int kFewRowsThreads = 128;
constexpr int64_t kFewRowsMax = 64;

template <NormOutputKind kKind, int kPerThread>
__global__ void __launch_bounds__(kFewRowsThreads)
    norm_forward_few_rows_kernel(In x, In residual, In extra, In weight, In bias, int64_t hidden, float eps,
                                 Out sum, NormOutput out, float* mean, float* rstd) {
  __shared__ float scratch[32];
  let_next_kernel_start();
  const int64_t r = blockIdx.x;
  const int64_t n8 = hidden / 8;
  float w[kPerThread][8], b[kPerThread][8] = {};
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * kFewRowsThreads;
    if (i >= n8) break;
    load8(weight, i, w[k]);
    if (bias != nullptr) load8(bias, i, b[k]);
  }
  wait_for_previous_kernels();
  const float scale = output_scale<kKind>(out);
  int amax_bits = 0;
  float v[kPerThread][8] = {};
  float total = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * kFewRowsThreads;
    if (i >= n8) break;
    load8(x + r * hidden, i, v[k]);
    if (residual != nullptr) {
      float add[8];
      load8(residual + r * hidden, i, add);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[k][j] += add[j];
      if (extra != nullptr) {
        load8(extra + r * hidden, i, add);
#pragma unroll
        for (int j = 0; j < 8; ++j) v[k][j] += add[j];
      }
      // The norm sees the sum as stored, rounded to its type, as after a separate add.
      store8(sum + r * hidden, i, v[k]);
      if (sum.narrow())
#pragma unroll
        for (int j = 0; j < 8; ++j) v[k][j] = narrow_to_float(float_to_narrow(v[k][j], sum.bf16()), sum.bf16());
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) total += v[k][j];
  }
  const float mu = mean != nullptr ? block_sum(total, scratch) / static_cast<float>(hidden) : 0.0f;
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * kFewRowsThreads;
    if (i >= n8) break;
#pragma unroll
    for (int j = 0; j < 8; ++j) sq += (v[k][j] - mu) * (v[k][j] - mu);
  }
  const float inv = rsqrtf(block_sum(sq, scratch) / static_cast<float>(hidden) + eps);
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(k) * kFewRowsThreads;
    if (i >= n8) break;
#pragma unroll
    for (int j = 0; j < 8; ++j) v[k][j] = (v[k][j] - mu) * inv * w[k][j] + b[k][j];
    write_output8<kKind>(out, r, hidden, i, v[k], scale, amax_bits);
  }
  if (threadIdx.x == 0) {
    if (mean != nullptr) mean[r] = mu;
    rstd[r] = inv;
  }
  finish_output<kKind>(out, amax_bits);
}

// dx may alias dy (unless accumulating): each lane reads its group of dy before writing the same
// group of dx.
__global__ void norm_backward_input8_kernel(In dy, In x, In weight, const float* mean,
                                            const float* rstd, int64_t rows, int64_t hidden,
                                            Out dx, bool accumulate) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t n8 = hidden / 8;
  const In xr = x + r * hidden;
  const In dyr = dy + r * hidden;
  const float mu = mean != nullptr ? mean[r] : 0.0f;
  const float inv = rstd[r];
  float g[8], xv[8], w[8];
  float sum_g = 0.0f;
  float sum_g_xhat = 0.0f;
  for (int64_t i = lane; i < n8; i += 32) {
    load8(dyr, i, g);
    load8(xr, i, xv);
    load8(weight, i, w);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      sum_g += g[j] * w[j];
      sum_g_xhat += g[j] * w[j] * (xv[j] - mu) * inv;
    }
  }
  const float mean_g = mean != nullptr ? warp_sum(sum_g) / static_cast<float>(hidden) : 0.0f;
  const float mean_g_xhat = warp_sum(sum_g_xhat) / static_cast<float>(hidden);
  const Out dxr = dx + r * hidden;
  for (int64_t i = lane; i < n8; i += 32) {
    load8(dyr, i, g);
    load8(xr, i, xv);
    load8(weight, i, w);
#pragma unroll
    for (int j = 0; j < 8; ++j) g[j] = inv * (g[j] * w[j] - mean_g - (xv[j] - mu) * inv * mean_g_xhat);
    if (accumulate) {
      float old[8];
      load8(In(dxr.raw(), dxr.type()), i, old);
#pragma unroll
      for (int j = 0; j < 8; ++j) g[j] += old[j];
    }
    store8(dxr, i, g);
  }
}

// Rows per chunk of the vector column reduction: 128 keeps the partials small (a 32768-row
// reduction has 256 chunks) while a 768-column one still fills the GPU (768 blocks).
constexpr int kVectorRowsPerChunk = 128;
// Rows each thread loads before adding any: the loads of a batch are in flight together, where a
// loop adding each row as it arrived waited a memory round trip per row.
constexpr int kColumnBatch = 4;

// Stage 1 of a column reduction, eight columns per thread: partial_value[chunk, c] = Σ dy and
// partial_xhat[chunk, c] = Σ dy·x̂ over the chunk's rows (either may be null). Block (32, 8):
// x picks eight columns, y strides the rows; the eight row sums are combined in a fixed order.
__global__ void column_partial8_kernel(In dy, In x, const float* mean, const float* rstd,
                                       int64_t rows, int64_t cols, float* partial_value,
                                       float* partial_xhat) {
  __shared__ float value_sums[8][32][9];
  __shared__ float xhat_sums[8][32][9];
  const int64_t group = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const bool active = group < cols / 8;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * kVectorRowsPerChunk;
  const int64_t last = min(first + kVectorRowsPerChunk, rows);
  float value[8] = {}, xhat[8] = {};
  if (active) {
    for (int64_t base = first + threadIdx.y; base < last; base += 8 * kColumnBatch) {
      // Rows past the chunk load its last row again and add nothing: the loads stay
      // unconditional, so that they are all issued before the first is waited for.
      float g[kColumnBatch][8], xv[kColumnBatch][8];
#pragma unroll
      for (int k = 0; k < kColumnBatch; ++k) load8(dy + min(base + 8 * k, last - 1) * cols, group, g[k]);
      if (partial_xhat != nullptr)
#pragma unroll
        for (int k = 0; k < kColumnBatch; ++k) load8(x + min(base + 8 * k, last - 1) * cols, group, xv[k]);
#pragma unroll
      for (int k = 0; k < kColumnBatch; ++k) {
        const int64_t r = base + 8 * k;
        if (r >= last) continue;
        if (partial_xhat != nullptr) {
          const float mu = mean != nullptr ? mean[r] : 0.0f;
          const float inv = rstd[r];
#pragma unroll
          for (int j = 0; j < 8; ++j) xhat[j] += g[k][j] * (xv[k][j] - mu) * inv;
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) value[j] += g[k][j];
      }
    }
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    value_sums[threadIdx.y][threadIdx.x][j] = value[j];
    xhat_sums[threadIdx.y][threadIdx.x][j] = xhat[j];
  }
  __syncthreads();
  // Thread (x, y) finishes column 8·group + y.
  if (!active) return;
  const int64_t c = group * 8 + threadIdx.y;
  const int64_t at = static_cast<int64_t>(blockIdx.y) * cols + c;
  float total_value = 0.0f, total_xhat = 0.0f;
  for (int k = 0; k < 8; ++k) {
    total_value += value_sums[k][threadIdx.x][threadIdx.y];
    total_xhat += xhat_sums[k][threadIdx.x][threadIdx.y];
  }
  if (partial_value != nullptr) partial_value[at] = total_value;
  if (partial_xhat != nullptr) partial_xhat[at] = total_xhat;
}

// Stage 2: out[c] += Σ_chunk partial[chunk, c] (= without `accumulate`) for the pair blockIdx.y
// picks (0: value, 1: xhat). Block (32, 8): y takes every eighth chunk; the eight sums are
// combined in order.
struct ColumnOutputs {
  const float* partial[2];
  float* out[2];
  bool accumulate;
};

__global__ void column_finish8_kernel(ColumnOutputs outputs, int64_t chunks, int64_t cols) {
  __shared__ float sums[8][33];
  const float* partial = outputs.partial[blockIdx.y];
  float* out = outputs.out[blockIdx.y];
  if (out == nullptr) return;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  float acc = 0.0f;
  if (c < cols)
#pragma unroll 8
    for (int64_t k = threadIdx.y; k < chunks; k += 8) acc += partial[k * cols + c];
  sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
    for (int k = 0; k < 8; ++k) total += sums[k][threadIdx.x];
    out[c] = outputs.accumulate ? out[c] + total : total;
  }
}

// The partial sums of a two-stage column reduction: `chunks` rows of `cols` columns for Σ dy
// (value) and for Σ dy·x̂ (xhat), each only where its output (dvalue, dxhat) is wanted; finish()
// adds them into the outputs (column_finish8_kernel; writes them over without `accumulate`) and
// frees them.
class ColumnPartials {
public:
  ColumnPartials(int64_t chunks, int64_t cols, float* dvalue, float* dxhat, bool accumulate, cudaStream_t stream)
      : chunks_(chunks), cols_(cols), dvalue_(dvalue), dxhat_(dxhat), accumulate_(accumulate), stream_(stream) {
    const size_t one = static_cast<size_t>(chunks * cols);
    MGT_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&buffer_), 2 * one * sizeof(float), stream));
    value_ = dvalue != nullptr ? buffer_ : nullptr;
    xhat_ = dxhat != nullptr ? buffer_ + one : nullptr;
  }
  ColumnPartials(const ColumnPartials&) = delete;
  ColumnPartials& operator=(const ColumnPartials&) = delete;

  float* value() const { return value_; }
  float* xhat() const { return xhat_; }

  void finish() {
    const ColumnOutputs outputs{{value_, xhat_}, {dvalue_, dxhat_}, accumulate_};
    column_finish8_kernel<<<dim3(static_cast<unsigned>((cols_ + 31) / 32), 2), dim3(32, 8), 0, stream_>>>(
        outputs, chunks_, cols_);
    MGT_CUDA_CHECK_LAUNCH(column_finish8_kernel);
    MGT_CUDA_CHECK(cudaFreeAsync(buffer_, stream_));
  }

private:
  int64_t chunks_;
  int64_t cols_;
  float* dvalue_;
  float* dxhat_;
  bool accumulate_;
  cudaStream_t stream_;
  float* buffer_ = nullptr;
  float* value_ = nullptr;
  float* xhat_ = nullptr;
};

// dvalue += Σ_r dy, dxhat += Σ_r dy·x̂ (either may be null; = without `accumulate`), eight
// columns per thread.
void column_sums8(In dy, In x, const float* mean, const float* rstd, int64_t rows, int64_t cols,
                  float* dvalue, float* dxhat, bool accumulate, cudaStream_t stream) {
  const int64_t chunks = (rows + kVectorRowsPerChunk - 1) / kVectorRowsPerChunk;
  ColumnPartials partials(chunks, cols, dvalue, dxhat, accumulate, stream);
  const dim3 grid(static_cast<unsigned>((cols / 8 + 31) / 32), static_cast<unsigned>(chunks));
  column_partial8_kernel<<<grid, dim3(32, 8), 0, stream>>>(dy, x, mean, rstd, rows, cols, partials.value(),
                                                           partials.xhat());
  MGT_CUDA_CHECK_LAUNCH(column_partial8_kernel);
  partials.finish();
}

// Rows per block of the fused norm backward: 512 blocks for 32768 rows, eight rows per warp.
constexpr int kFusedRowsPerBlock = 64;

// The norm backward in one pass where a row's groups of eight fit kGroups per lane
// (hidden ≤ 256·kGroups): norm_backward_input8_kernel's dx, and from the same loads the column
// sums Σ dy (partial_value, LayerNorm's bias) and Σ dy·x̂ (partial_xhat, the weight) of the
// block's rows, written as the block's partial for column_finish8_kernel. dy and x are read once
// instead of once more by a separate column reduction. Each warp takes the block's rows w, w + 8,
// …; each lane owns the same column groups in every row and keeps their sums in registers; the
// warps' sums are combined in a fixed order, so the result does not depend on scheduling. dx may
// alias dy (unless accumulating): a lane reads its groups of dy before writing them.
template <int kGroups>
__global__ void __launch_bounds__(kRowThreads, kGroups <= 3 ? 2 : 1)
    norm_backward_fused8_kernel(In dy, In x, In weight, const float* mean, const float* rstd, int64_t rows,
                                int64_t hidden, Out dx, bool accumulate, float* partial_value, float* partial_xhat) {
  __shared__ float combine[kWarpsPerBlock][kGroups * 256];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t n8 = hidden / 8;
  float column_value[kGroups][8] = {}, column_xhat[kGroups][8] = {};
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kFusedRowsPerBlock;
  const int64_t last = min(first + kFusedRowsPerBlock, rows);
  for (int64_t r = first + warp; r < last; r += kWarpsPerBlock) {
    const In xr = x + r * hidden;
    const In dyr = dy + r * hidden;
    const Out dxr = dx + r * hidden;
    const float mu = mean != nullptr ? mean[r] : 0.0f;
    const float inv = rstd[r];
    // Groups past the row load its last group again (unused): unconditional loads are all issued
    // before the first is waited for.
    float g[kGroups][8], xhat[kGroups][8];
#pragma unroll
    for (int k = 0; k < kGroups; ++k) load8(dyr, min(static_cast<int64_t>(lane + 32 * k), n8 - 1), g[k]);
#pragma unroll
    for (int k = 0; k < kGroups; ++k) load8(xr, min(static_cast<int64_t>(lane + 32 * k), n8 - 1), xhat[k]);
    float sum_g = 0.0f, sum_g_xhat = 0.0f;
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int64_t i = lane + 32 * k;
      if (i >= n8) break;
      float w[8];
      load8(weight, i, w);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        xhat[k][j] = (xhat[k][j] - mu) * inv;
        column_value[k][j] += g[k][j];
        column_xhat[k][j] += g[k][j] * xhat[k][j];
        g[k][j] *= w[j];
        sum_g += g[k][j];
        sum_g_xhat += g[k][j] * xhat[k][j];
      }
    }
    const float mean_g = mean != nullptr ? warp_sum(sum_g) / static_cast<float>(hidden) : 0.0f;
    const float mean_g_xhat = warp_sum(sum_g_xhat) / static_cast<float>(hidden);
    float old[kGroups][8] = {};
    if (accumulate)
#pragma unroll
      for (int k = 0; k < kGroups; ++k) load8(In(dxr.raw(), dxr.type()), min(static_cast<int64_t>(lane + 32 * k), n8 - 1), old[k]);
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int64_t i = lane + 32 * k;
      if (i >= n8) break;
      float out[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) out[j] = inv * (g[k][j] - mean_g - xhat[k][j] * mean_g_xhat) + old[k][j];
      store8(dxr, i, out);
    }
  }
  float* const partials[2] = {partial_value, partial_xhat};
  for (int which = 0; which < 2; ++which) {
    float* partial = partials[which];
    if (partial == nullptr) continue;  // the same for the whole block
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int64_t i = lane + 32 * k;
      if (i >= n8) break;
#pragma unroll
      for (int j = 0; j < 8; ++j) combine[warp][8 * i + j] = which == 0 ? column_value[k][j] : column_xhat[k][j];
    }
    __syncthreads();
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
      float total = 0.0f;
      for (int w = 0; w < kWarpsPerBlock; ++w) total += combine[w][c];
      partial[static_cast<int64_t>(blockIdx.x) * hidden + c] = total;
    }
    __syncthreads();
  }
}

// Rows of at most 128 elements (the query and key norms of --qk-layernorm, a head each), where a
// warp per row leaves half its lanes idle or more: kLanes lanes a row (the power of two that
// holds its groups of eight), 32 / kLanes rows a warp, each lane one group in registers, so that
// each operand is read once. A row's sums go over its kLanes lanes by shuffles, in a fixed order.
template <int kLanes>
__device__ __forceinline__ float row_group_sum(float v) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Rows per block of norm_backward_narrow8_kernel: 512 blocks (their partial column sums) for
// 131,072 rows, sixteen passes of a warp at 16 lanes a row.
constexpr int64_t kNarrowRowsPerBlock = 256;

template <int kLanes>
__global__ void norm_forward_narrow8_kernel(In x, In weight, In bias, int64_t rows, int64_t hidden, float eps, Out y,
                                            float* mean, float* rstd) {
  constexpr int kRowsPerWarp = 32 / kLanes;
  const int lane = threadIdx.x % 32;
  const int64_t r =
      (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32) * kRowsPerWarp + lane / kLanes;
  const int64_t i = lane % kLanes;
  const bool active = r < rows && i < hidden / 8;
  float v[8] = {};
  if (active) load8(x + r * hidden, i, v);
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) sum += v[j];
  const float mu = mean != nullptr ? row_group_sum<kLanes>(sum) / static_cast<float>(hidden) : 0.0f;
  float sq = 0.0f;
  if (active)
#pragma unroll
    for (int j = 0; j < 8; ++j) sq += (v[j] - mu) * (v[j] - mu);
  const float inv = rsqrtf(row_group_sum<kLanes>(sq) / static_cast<float>(hidden) + eps);
  if (!active) return;
  float w[8], b[8] = {};
  load8(weight, i, w);
  if (bias != nullptr) load8(bias, i, b);
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = (v[j] - mu) * inv * w[j] + b[j];
  store8(y + r * hidden, i, v);
  if (i == 0) {
    if (mean != nullptr) mean[r] = mu;
    rstd[r] = inv;
  }
}

// The fused backward (norm_backward_fused8_kernel's outputs) over narrow rows, laid out as
// norm_forward_narrow8_kernel's. Each lane keeps its group's column sums over its rows; the
// warp's rows are combined by shuffles across the row slots (a fixed butterfly), then the block's
// warps in order into its partial. dx may alias dy (unless accumulating): a lane reads its group
// of dy before writing it.
template <int kLanes>
__global__ void __launch_bounds__(kRowThreads)
    norm_backward_narrow8_kernel(In dy, In x, In weight, const float* mean, const float* rstd, int64_t rows,
                                 int64_t hidden, Out dx, bool accumulate, float* partial_value, float* partial_xhat) {
  constexpr int kRowsPerWarp = 32 / kLanes;
  __shared__ float combine[2][kWarpsPerBlock][8 * kLanes];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t i = lane % kLanes;
  const bool column = i < hidden / 8;
  float w[8] = {};
  if (column) load8(weight, i, w);
  float column_value[8] = {}, column_xhat[8] = {};
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kNarrowRowsPerBlock;
  const int64_t last = min(first + kNarrowRowsPerBlock, rows);
  // The loop's bounds are the warp's, so every lane takes part in every shuffle.
  for (int64_t base = first + warp * kRowsPerWarp; base < last; base += kWarpsPerBlock * kRowsPerWarp) {
    const int64_t r = base + lane / kLanes;
    const bool active = column && r < last;
    float g[8] = {}, xhat[8] = {}, old[8] = {};
    float mu = 0.0f, inv = 0.0f;
    if (active) {
      load8(dy + r * hidden, i, g);
      load8(x + r * hidden, i, xhat);
      if (accumulate) load8(In(dx.raw(), dx.type()) + r * hidden, i, old);
      mu = mean != nullptr ? mean[r] : 0.0f;
      inv = rstd[r];
    }
    float sum_g = 0.0f, sum_g_xhat = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      xhat[j] = (xhat[j] - mu) * inv;
      column_value[j] += g[j];
      column_xhat[j] += g[j] * xhat[j];
      g[j] *= w[j];
      sum_g += g[j];
      sum_g_xhat += g[j] * xhat[j];
    }
    const float mean_g = mean != nullptr ? row_group_sum<kLanes>(sum_g) / static_cast<float>(hidden) : 0.0f;
    const float mean_g_xhat = row_group_sum<kLanes>(sum_g_xhat) / static_cast<float>(hidden);
    if (!active) continue;
    float out[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) out[j] = inv * (g[j] - mean_g - xhat[j] * mean_g_xhat) + old[j];
    store8(dx + r * hidden, i, out);
  }
#pragma unroll
  for (int offset = kLanes; offset < 32; offset *= 2)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      column_value[j] += __shfl_xor_sync(0xffffffffu, column_value[j], offset);
      column_xhat[j] += __shfl_xor_sync(0xffffffffu, column_xhat[j], offset);
    }
  if (lane < kLanes && column)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      combine[0][warp][8 * i + j] = column_value[j];
      combine[1][warp][8 * i + j] = column_xhat[j];
    }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
    float value = 0.0f, xhat = 0.0f;
    for (int w8 = 0; w8 < kWarpsPerBlock; ++w8) {
      value += combine[0][w8][c];
      xhat += combine[1][w8][c];
    }
    const int64_t out = static_cast<int64_t>(blockIdx.x) * hidden + c;
    if (partial_value != nullptr) partial_value[out] = value;
    if (partial_xhat != nullptr) partial_xhat[out] = xhat;
  }
}

// The lanes a narrow row takes (hidden ≤ 128: at most sixteen groups of eight), 0 for a wider one.
int narrow_row_lanes(int64_t hidden) {
  const int64_t n8 = hidden / 8;
  return n8 > 16 ? 0 : n8 > 8 ? 16 : n8 > 4 ? 8 : 4;
}

// norm_backward_narrow8_kernel with its column partials; false for rows wider than 128.
bool norm_backward_narrow8(In dy, In x, In weight, const float* mean, const float* rstd, int64_t rows, int64_t hidden,
                           Out dx, bool accumulate_dx, float* dweight, float* dbias, bool accumulate_params,
                           cudaStream_t stream) {
  const int lanes = narrow_row_lanes(hidden);
  if (lanes == 0) return false;
  const int64_t chunks = (rows + kNarrowRowsPerBlock - 1) / kNarrowRowsPerBlock;
  ColumnPartials partials(chunks, hidden, dbias, dweight, accumulate_params, stream);
  const auto launch = [&](auto kernel) {
    kernel<<<static_cast<unsigned>(chunks), kRowThreads, 0, stream>>>(dy, x, weight, mean, rstd, rows, hidden, dx,
                                                                      accumulate_dx, partials.value(), partials.xhat());
    MGT_CUDA_CHECK_LAUNCH(norm_backward_narrow8_kernel);
  };
  if (lanes == 16) launch(norm_backward_narrow8_kernel<16>);
  else if (lanes == 8) launch(norm_backward_narrow8_kernel<8>);
  else launch(norm_backward_narrow8_kernel<4>);
  partials.finish();
  return true;
}

// norm_forward_narrow8_kernel; false for rows wider than 128.
bool norm_forward_narrow8(In x, In weight, In bias, int64_t rows, int64_t hidden, float eps, Out y, float* mean,
                          float* rstd, cudaStream_t stream) {
  const int lanes = narrow_row_lanes(hidden);
  if (lanes == 0) return false;
  const int64_t rows_per_block = kWarpsPerBlock * (32 / lanes);
  const auto blocks = static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
  const auto launch = [&](auto kernel) {
    kernel<<<blocks, kRowThreads, 0, stream>>>(x, weight, bias, rows, hidden, eps, y, mean, rstd);
    MGT_CUDA_CHECK_LAUNCH(norm_forward_narrow8_kernel);
  };
  if (lanes == 16) launch(norm_forward_narrow8_kernel<16>);
  else if (lanes == 8) launch(norm_forward_narrow8_kernel<8>);
  else launch(norm_forward_narrow8_kernel<4>);
  return true;
}

// A group of eight 2-byte elements as loaded: rows of up to 2048 elements stay in a lane's
// registers three times over (dy, x and dx's old values) where as floats they would not fit.
__device__ __forceinline__ uint4 load_packed8(In p, int64_t v) { return static_cast<const uint4*>(p.raw())[v]; }

__device__ __forceinline__ void unpack8(const uint4& packed, bool bf16, float (&out)[8]) {
  const auto* h = reinterpret_cast<const unsigned short*>(&packed);
#pragma unroll
  for (int j = 0; j < 8; ++j) out[j] = narrow_to_float(h[j], bf16);
}

// Threads per block of norm_backward_split8_kernel: sixteen warps, 16 / kSplit rows in flight.
constexpr int kSplitThreads = 512;
constexpr int kSplitWarps = kSplitThreads / 32;

// norm_backward_fused8_kernel's one pass for rows of 1,025 to 4,096 elements of a 2-byte type,
// where neither a row nor its column sums fit one warp's registers. kSplit warps share a row, each
// its own share of the row's groups of eight (at most 32·kGroups of them), and add their halves of
// the row sums at a barrier of their own (bar.sync with kSplit·32 threads; the sums in a fixed
// order, so every warp of the row gets the same total). Each warp keeps its columns' sums in
// shared memory ([warp][Σ dy, Σ dy·x̂][32·8·kGroups] floats: up to 128 KiB a block), and the
// block adds its warps' in warp order into its partial. A row's dy, x and dx's old values are
// loaded together, packed, before any is used. The block takes rows_per_block consecutive rows,
// its warp teams rows t, t + 16 / kSplit, …; dx may alias dy as there.
template <int kSplit, int kGroups>
__global__ void __launch_bounds__(kSplitThreads, 1)
    norm_backward_split8_kernel(In dy, In x, In weight, const float* mean, const float* rstd, int64_t rows,
                                int64_t hidden, int64_t rows_per_block, Out dx, bool accumulate,
                                float* partial_value, float* partial_xhat) {
  constexpr int kTeams = kSplitWarps / kSplit;
  constexpr int kShare = 32 * 8 * kGroups;  // the columns a warp's sums hold
  extern __shared__ float4 warp_sums_storage[];
  float* const warp_sums = reinterpret_cast<float*>(warp_sums_storage);
  __shared__ float row_sums[2][kTeams][kSplit][2];  // by row parity: Σ g, Σ g·x̂ of each warp's share
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int team = warp / kSplit;
  const int member = warp % kSplit;
  const int64_t n8 = hidden / 8;
  const int64_t share8 = (n8 + kSplit - 1) / kSplit;  // groups per member; the last may have fewer
  const int64_t first_group = member * share8;
  const int64_t end_group = min(first_group + share8, n8);
  float* const value_sums = warp_sums + static_cast<int64_t>(warp) * 2 * kShare;
  float* const xhat_sums = value_sums + kShare;
  for (int c = lane; c < 2 * kShare; c += 32) value_sums[c] = 0.0f;
  __syncwarp();
  const int64_t first = static_cast<int64_t>(blockIdx.x) * rows_per_block;
  const int64_t last = min(first + rows_per_block, rows);
  int parity = 0;
  // Every warp of a team runs the same rows, so the team's barrier is met by all of them.
  for (int64_t r = first + team; r < last; r += kTeams, parity ^= 1) {
    const In xr = x + r * hidden;
    const In dyr = dy + r * hidden;
    const Out dxr = dx + r * hidden;
    const float mu = mean != nullptr ? mean[r] : 0.0f;
    const float inv = rstd[r];
    // Groups past the share load its last group again (unused), as in the kernels above.
    uint4 g_packed[kGroups], x_packed[kGroups], old_packed[kGroups];
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int64_t i = min(first_group + lane + 32 * k, end_group - 1);
      g_packed[k] = load_packed8(dyr, i);
      x_packed[k] = load_packed8(xr, i);
      if (accumulate) old_packed[k] = load_packed8(In(dxr.raw(), dxr.type()), i);
    }
    float sum_g = 0.0f, sum_g_xhat = 0.0f;
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int64_t i = first_group + lane + 32 * k;
      if (i >= end_group) break;
      float g[8], xv[8], w[8];
      unpack8(g_packed[k], dy.bf16(), g);
      unpack8(x_packed[k], x.bf16(), xv);
      load8(weight, i, w);
      const int at = 8 * (lane + 32 * k);
      float4* const value = reinterpret_cast<float4*>(value_sums + at);
      float4* const xhat = reinterpret_cast<float4*>(xhat_sums + at);
      float v[8], xs[8];
      *reinterpret_cast<float4*>(v) = value[0];
      *reinterpret_cast<float4*>(v + 4) = value[1];
      *reinterpret_cast<float4*>(xs) = xhat[0];
      *reinterpret_cast<float4*>(xs + 4) = xhat[1];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float xh = (xv[j] - mu) * inv;
        v[j] += g[j];
        xs[j] += g[j] * xh;
        const float gw = g[j] * w[j];
        sum_g += gw;
        sum_g_xhat += gw * xh;
      }
      value[0] = *reinterpret_cast<const float4*>(v);
      value[1] = *reinterpret_cast<const float4*>(v + 4);
      xhat[0] = *reinterpret_cast<const float4*>(xs);
      xhat[1] = *reinterpret_cast<const float4*>(xs + 4);
    }
    sum_g = warp_sum(sum_g);
    sum_g_xhat = warp_sum(sum_g_xhat);
    if (lane == 0) {
      row_sums[parity][team][member][0] = sum_g;
      row_sums[parity][team][member][1] = sum_g_xhat;
    }
    // The team's barrier: its warps' shares are written. The slots alternate with the rows, so a
    // warp writing the next row's cannot overwrite ones a slower warp of its team still reads.
    asm volatile("bar.sync %0, %1;" ::"r"(1 + team), "r"(kSplit * 32) : "memory");
    float total_g = 0.0f, total_g_xhat = 0.0f;
#pragma unroll
    for (int m = 0; m < kSplit; ++m) {
      total_g += row_sums[parity][team][m][0];
      total_g_xhat += row_sums[parity][team][m][1];
    }
    const float mean_g = mean != nullptr ? total_g / static_cast<float>(hidden) : 0.0f;
    const float mean_g_xhat = total_g_xhat / static_cast<float>(hidden);
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int64_t i = first_group + lane + 32 * k;
      if (i >= end_group) break;
      float g[8], xv[8], w[8], old[8] = {};
      unpack8(g_packed[k], dy.bf16(), g);
      unpack8(x_packed[k], x.bf16(), xv);
      if (accumulate) unpack8(old_packed[k], dxr.bf16(), old);
      load8(weight, i, w);
      float out[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) out[j] = inv * (g[j] * w[j] - mean_g - (xv[j] - mu) * inv * mean_g_xhat) + old[j];
      store8(dxr, i, out);
    }
  }
  __syncthreads();
  // Column c is member c / (8·share8)'s; its sums are at c's offset in that member's share, in
  // every team's warp of that member.
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
    const int64_t owner = c / (8 * share8);
    const int64_t at = c - owner * 8 * share8;
    float value = 0.0f, xhat = 0.0f;
    for (int t = 0; t < kTeams; ++t) {
      const float* sums = warp_sums + (static_cast<int64_t>(t) * kSplit + owner) * 2 * kShare;
      value += sums[at];
      xhat += sums[kShare + at];
    }
    const int64_t out = static_cast<int64_t>(blockIdx.x) * hidden + c;
    if (partial_value != nullptr) partial_value[out] = value;
    if (partial_xhat != nullptr) partial_xhat[out] = xhat;
  }
}

// Rows per block of norm_backward_split8_kernel, from the row count alone (so that the partial
// sums, and the rounding, do not depend on the GPU): about 128 blocks, one per multiprocessor of
// an H100 or H200, for 4,096 to 8,192 rows; 8 to 64 rows each.
int64_t split_rows_per_block(int64_t rows) {
  constexpr int64_t kMultiple = 8;
  const int64_t per_block = (rows / 128 + kMultiple - 1) / kMultiple * kMultiple;
  return std::min<int64_t>(std::max<int64_t>(per_block, kMultiple), kFusedRowsPerBlock);
}

template <int kSplit, int kGroups>
void launch_split(In dy, In x, In weight, const float* mean, const float* rstd, int64_t rows, int64_t hidden,
                  int64_t rows_per_block, Out dx, bool accumulate, ColumnPartials& partials, unsigned blocks,
                  cudaStream_t stream) {
  const size_t shared = static_cast<size_t>(kSplitWarps) * 2 * 32 * 8 * kGroups * sizeof(float);
  MGT_CUDA_CHECK(cudaFuncSetAttribute(norm_backward_split8_kernel<kSplit, kGroups>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
  norm_backward_split8_kernel<kSplit, kGroups><<<blocks, kSplitThreads, shared, stream>>>(
      dy, x, weight, mean, rstd, rows, hidden, rows_per_block, dx, accumulate, partials.value(), partials.xhat());
  MGT_CUDA_CHECK_LAUNCH(norm_backward_split8_kernel);
}

// The split one pass where the row fits it (1,025 to 4,096 elements; 2-byte dy, x and, when
// accumulating, dx): two warps a row up to 2,048 elements, four up to 4,096. False otherwise.
bool norm_backward_split8(In dy, In x, In weight, const float* mean, const float* rstd, int64_t rows, int64_t hidden,
                          Out dx, bool accumulate_dx, float* dweight, float* dbias, bool accumulate_params,
                          cudaStream_t stream) {
  const int64_t n8 = hidden / 8;
  if (n8 <= 128 || n8 > 512 || !dy.narrow() || !x.narrow() || (accumulate_dx && !dx.narrow())) return false;
  const int split = n8 <= 256 ? 2 : 4;
  const int64_t groups = ((n8 + split - 1) / split + 31) / 32;  // per lane: 3 or 4
  const int64_t per_block = split_rows_per_block(rows);
  const int64_t chunks = (rows + per_block - 1) / per_block;
  ColumnPartials partials(chunks, hidden, dbias, dweight, accumulate_params, stream);
  const auto blocks = static_cast<unsigned>(chunks);
  const auto launch = [&](auto launcher) {
    launcher(dy, x, weight, mean, rstd, rows, hidden, per_block, dx, accumulate_dx, partials, blocks, stream);
  };
  if (split == 2) {
    if (groups == 3) launch(launch_split<2, 3>);
    else launch(launch_split<2, 4>);
  } else {
    if (groups == 3) launch(launch_split<4, 3>);
    else launch(launch_split<4, 4>);
  }
  partials.finish();
  return true;
}

// The fused norm backward (norm_backward_fused8_kernel) where the row fits: dweight += Σ dy·x̂,
// dbias += Σ dy (dbias may be null), dx = or += the input's gradient; up to 128 elements
// norm_backward_narrow8_kernel, from 1,025 to 4,096 elements norm_backward_split8_kernel. False where neither fits. (A one-pass kernel with a block per row,
// its row sums combined over the warps at a barrier per one to four rows, took 4.5 to 7.1 ms per
// step of the 1.3B model's 49 norm backwards (8192 × 2048) on an H200, the two passes 4.65 ms.)
bool norm_backward_fused8(In dy, In x, In weight, const float* mean, const float* rstd, int64_t rows, int64_t hidden,
                          Out dx, bool accumulate_dx, float* dweight, float* dbias, bool accumulate_params,
                          cudaStream_t stream) {
  if (norm_backward_narrow8(dy, x, weight, mean, rstd, rows, hidden, dx, accumulate_dx, dweight, dbias,
                            accumulate_params, stream))
    return true;
  const int64_t groups = (hidden / 8 + 31) / 32;
  if (groups > 4)
    return norm_backward_split8(dy, x, weight, mean, rstd, rows, hidden, dx, accumulate_dx, dweight, dbias,
                                accumulate_params, stream);
  const int64_t chunks = (rows + kFusedRowsPerBlock - 1) / kFusedRowsPerBlock;
  ColumnPartials partials(chunks, hidden, dbias, dweight, accumulate_params, stream);
  const auto launch = [&](auto kernel) {
    kernel<<<static_cast<unsigned>(chunks), kRowThreads, 0, stream>>>(dy, x, weight, mean, rstd, rows, hidden, dx,
                                                                      accumulate_dx, partials.value(), partials.xhat());
  };
  if (groups == 1) launch(norm_backward_fused8_kernel<1>);
  else if (groups == 2) launch(norm_backward_fused8_kernel<2>);
  else if (groups == 3) launch(norm_backward_fused8_kernel<3>);
  else launch(norm_backward_fused8_kernel<4>);
  MGT_CUDA_CHECK_LAUNCH(norm_backward_fused8_kernel);
  partials.finish();
  return true;
}

unsigned row_warp_blocks(int64_t rows) {
  return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

// The vector norm of `rows` rows: a block per row from registers for the few rows of a decode
// step (rows of at most 8 × kFewRowsThreads × 8 elements), several rows a warp for rows of at
// most 128 elements (norm_forward_narrow8_kernel, without a residual or an FP8 cast), else a warp
// per row.
template <NormOutputKind kKind = NormOutputKind::kStore>
void norm_forward8(In x, In residual, In extra, In weight, In bias, int64_t rows, int64_t hidden, float eps,
                   Out sum, NormOutput out, float* mean, float* rstd, cudaStream_t stream) {
  const int64_t per_thread = (hidden / 8 + kFewRowsThreads - 1) / kFewRowsThreads;
  if (rows <= kFewRowsMax && per_thread <= 8) {
    const auto launch = [&](auto kernel) {
      launch_early(kernel, static_cast<unsigned>(rows), kFewRowsThreads, stream, x, residual, extra, weight, bias,
                   hidden, eps, sum, out, mean, rstd);
    };
    if (per_thread <= 1) launch(norm_forward_few_rows_kernel<kKind, 1>);
    else if (per_thread <= 2) launch(norm_forward_few_rows_kernel<kKind, 2>);
    else if (per_thread <= 4) launch(norm_forward_few_rows_kernel<kKind, 4>);
    else launch(norm_forward_few_rows_kernel<kKind, 8>);
    return;
  }
  if (kKind == NormOutputKind::kStore && residual == nullptr &&
      norm_forward_narrow8(x, weight, bias, rows, hidden, eps, out.y, mean, rstd, stream))
    return;
  norm_forward8_kernel<kKind><<<row_warp_blocks(rows), kRowThreads, 0, stream>>>(
      x, residual, extra, weight, bias, rows, hidden, eps, sum, out, mean, rstd);
  MGT_CUDA_CHECK_LAUNCH(norm_forward8_kernel);
}

}  // namespace

void layer_norm_forward(In x, In weight, In bias, int64_t rows,
                        int64_t hidden, float eps, Out y, float* mean, float* rstd,
                        cudaStream_t stream) {
  if (rows == 0) return;
  if (vectorizable(hidden, {x.raw(), weight.raw(), bias.raw(), y.raw()})) {
    norm_forward8(x, In(), In(), weight, bias, rows, hidden, eps, Out(), {y}, mean, rstd, stream);
    return;
  }
  layer_norm_forward_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      x, weight, bias, hidden, eps, y, mean, rstd);
  MGT_CUDA_CHECK_LAUNCH(layer_norm_forward_kernel);
}

void layer_norm_backward(In dy, In x, In weight, const float* mean,
                         const float* rstd, int64_t rows, int64_t hidden, Out dx, bool accumulate_dx,
                         float* dweight, float* dbias, bool accumulate_params, cudaStream_t stream) {
  if (rows == 0) return;
  if (vectorizable(hidden, {dy.raw(), x.raw(), weight.raw(), dx.raw()})) {
    if (norm_backward_fused8(dy, x, weight, mean, rstd, rows, hidden, dx, accumulate_dx, dweight, dbias,
                             accumulate_params, stream))
      return;
    column_sums8(dy, x, mean, rstd, rows, hidden, dbias, dweight, accumulate_params, stream);
    // dx last: it may alias dy.
    norm_backward_input8_kernel<<<row_warp_blocks(rows), kRowThreads, 0, stream>>>(
        dy, x, weight, mean, rstd, rows, hidden, dx, accumulate_dx);
    MGT_CUDA_CHECK_LAUNCH(norm_backward_input8_kernel);
    return;
  }
  column_sums(dy, x, mean, rstd, ColumnTerm::kValueTimesXhat, rows, hidden, dweight, accumulate_params, stream);
  if (dbias != nullptr)
    column_sums(dy, x, mean, rstd, ColumnTerm::kValue, rows, hidden, dbias, accumulate_params, stream);
  // dx last: it may alias dy.
  norm_backward_input_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      dy, x, weight, mean, rstd, hidden, dx, accumulate_dx);
  MGT_CUDA_CHECK_LAUNCH(norm_backward_input_kernel);
}

void rms_norm_forward(In x, In weight, int64_t rows, int64_t hidden, float eps,
                      Out y, float* rstd, cudaStream_t stream) {
  if (rows == 0) return;
  if (vectorizable(hidden, {x.raw(), weight.raw(), y.raw()})) {
    norm_forward8(x, In(), In(), weight, In(), rows, hidden, eps, Out(), {y}, nullptr, rstd, stream);
    return;
  }
  rms_norm_forward_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(x, weight, hidden,
                                                                                  eps, y, rstd);
  MGT_CUDA_CHECK_LAUNCH(rms_norm_forward_kernel);
}

void rms_norm_backward(In dy, In x, In weight, const float* rstd,
                       int64_t rows, int64_t hidden, Out dx, bool accumulate_dx, float* dweight,
                       bool accumulate_params, cudaStream_t stream) {
  if (rows == 0) return;
  if (vectorizable(hidden, {dy.raw(), x.raw(), weight.raw(), dx.raw()})) {
    if (norm_backward_fused8(dy, x, weight, nullptr, rstd, rows, hidden, dx, accumulate_dx, dweight, nullptr,
                             accumulate_params, stream))
      return;
    column_sums8(dy, x, nullptr, rstd, rows, hidden, nullptr, dweight, accumulate_params, stream);
    norm_backward_input8_kernel<<<row_warp_blocks(rows), kRowThreads, 0, stream>>>(
        dy, x, weight, nullptr, rstd, rows, hidden, dx, accumulate_dx);
    MGT_CUDA_CHECK_LAUNCH(norm_backward_input8_kernel);
    return;
  }
  column_sums(dy, x, nullptr, rstd, ColumnTerm::kValueTimesXhat, rows, hidden, dweight, accumulate_params, stream);
  norm_backward_input_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      dy, x, weight, nullptr, rstd, hidden, dx, accumulate_dx);
  MGT_CUDA_CHECK_LAUNCH(norm_backward_input_kernel);
}

bool add_norm_forward(In a, In b, In c, In weight, In bias, int64_t rows, int64_t hidden, float eps, Out sum, Out y,
                      float* mean, float* rstd, cudaStream_t stream) {
  if (!vectorizable(hidden, {a.raw(), b.raw(), c.raw(), weight.raw(), bias.raw(), sum.raw(), y.raw()})) return false;
  if (rows == 0) return true;
  norm_forward8(a, b, c, weight, bias, rows, hidden, eps, sum, {y}, mean, rstd, stream);
  return true;
}

bool fp8_norm_forward(In x, In residual, In extra, In weight, In bias, int64_t rows, int64_t hidden, float eps,
                      Out sum, float* mean, float* rstd, const float* scale, float* amax, Fp8CastFormat format,
                      Fp8CastOutput codes, cudaStream_t stream) {
  if (rows <= 0 || !vectorizable(hidden, {x.raw(), residual.raw(), extra.raw(), weight.raw(), bias.raw(), sum.raw()}) ||
      reinterpret_cast<uintptr_t>(codes.codes) % 8 != 0)
    return false;
  // The output is rounded to the type the norm's input has, as the norm's own output would be.
  const In input = residual != nullptr ? In(sum.raw(), sum.type()) : x;
  NormOutput out;
  out.narrow = input.narrow();
  out.bf16 = input.bf16();
  out.scale = scale;
  out.amax = reinterpret_cast<int*>(amax);  // null where no amax is recorded
  out.codes = codes.codes;
  out.scale_inv = codes.scale_inv;
  if (format.e5m2) {
    norm_forward8<NormOutputKind::kE5M2>(x, residual, extra, weight, bias, rows, hidden, eps, sum, out, mean, rstd,
                                        stream);
  } else {
    norm_forward8<NormOutputKind::kE4M3>(x, residual, extra, weight, bias, rows, hidden, eps, sum, out, mean, rstd,
                                        stream);
  }
  return true;
}

void bias_backward(In dy, int64_t rows, int64_t cols, float* dbias, bool accumulate, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  if (vectorizable(cols, {dy.raw()})) {
    column_sums8(dy, nullptr, nullptr, nullptr, rows, cols, dbias, nullptr, accumulate, stream);
    return;
  }
  column_sums(dy, nullptr, nullptr, nullptr, ColumnTerm::kValue, rows, cols, dbias, accumulate, stream);
}

}  // namespace mgt::cuda
