#include "kernels/cuda/norms.hpp"

#include "kernels/cuda/launch.cuh"

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
                                           Out dx) {
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
    dxr[i] = inv * (dyr[i] * weight[i] - mean_g - xhat * mean_g_xhat);
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

// Stage 2: out[c] += Σ_chunk partial[chunk, c], chunks in order.
__global__ void column_finish_kernel(const float* partial, int64_t chunks, int64_t cols,
                                     float* out) {
  for (int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; c < cols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float total = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) total += partial[k * cols + c];
    out[c] += total;
  }
}

void column_sums(In dy, In x, const float* mean, const float* rstd,
                 ColumnTerm term, int64_t rows, int64_t cols, float* out, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  const int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  float* partial = nullptr;
  MGT_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&partial),
                                 static_cast<size_t>(chunks * cols) * sizeof(float), stream));
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(chunks));
  column_partial_kernel<<<grid, dim3(32, 8), 0, stream>>>(dy, x, mean, rstd, term, rows, cols,
                                                          partial);
  MGT_CUDA_CHECK_LAUNCH(column_partial_kernel);
  column_finish_kernel<<<grid_for(cols), kThreads, 0, stream>>>(partial, chunks, cols, out);
  MGT_CUDA_CHECK_LAUNCH(column_finish_kernel);
  MGT_CUDA_CHECK(cudaFreeAsync(partial, stream));
}

}  // namespace

void layer_norm_forward(In x, In weight, In bias, int64_t rows,
                        int64_t hidden, float eps, Out y, float* mean, float* rstd,
                        cudaStream_t stream) {
  if (rows == 0) return;
  layer_norm_forward_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      x, weight, bias, hidden, eps, y, mean, rstd);
  MGT_CUDA_CHECK_LAUNCH(layer_norm_forward_kernel);
}

void layer_norm_backward(In dy, In x, In weight, const float* mean,
                         const float* rstd, int64_t rows, int64_t hidden, Out dx,
                         float* dweight, float* dbias, cudaStream_t stream) {
  if (rows == 0) return;
  column_sums(dy, x, mean, rstd, ColumnTerm::kValueTimesXhat, rows, hidden, dweight, stream);
  if (dbias != nullptr) column_sums(dy, x, mean, rstd, ColumnTerm::kValue, rows, hidden, dbias, stream);
  // dx last: it may alias dy.
  norm_backward_input_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      dy, x, weight, mean, rstd, hidden, dx);
  MGT_CUDA_CHECK_LAUNCH(norm_backward_input_kernel);
}

void rms_norm_forward(In x, In weight, int64_t rows, int64_t hidden, float eps,
                      Out y, float* rstd, cudaStream_t stream) {
  if (rows == 0) return;
  rms_norm_forward_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(x, weight, hidden,
                                                                                  eps, y, rstd);
  MGT_CUDA_CHECK_LAUNCH(rms_norm_forward_kernel);
}

void rms_norm_backward(In dy, In x, In weight, const float* rstd,
                       int64_t rows, int64_t hidden, Out dx, float* dweight,
                       cudaStream_t stream) {
  if (rows == 0) return;
  column_sums(dy, x, nullptr, rstd, ColumnTerm::kValueTimesXhat, rows, hidden, dweight, stream);
  norm_backward_input_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      dy, x, weight, nullptr, rstd, hidden, dx);
  MGT_CUDA_CHECK_LAUNCH(norm_backward_input_kernel);
}

void bias_backward(In dy, int64_t rows, int64_t cols, float* dbias, cudaStream_t stream) {
  column_sums(dy, nullptr, nullptr, nullptr, ColumnTerm::kValue, rows, cols, dbias, stream);
}

}  // namespace mgt::cuda
