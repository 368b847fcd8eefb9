#include "kernels/cuda/cross_entropy.hpp"

#include <cstdint>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vector8.cuh"

namespace mgt::cuda {
namespace {

constexpr int kRowThreads = 512;

// The maximum of a row and the sum of exp(x − maximum) over it, in one pass: each thread keeps
// its running sum relative to its running maximum, rescaled when the maximum grows (online
// softmax), and the block then combines them. Every thread of the block gets both. With
// `vectors` (a row length that is a multiple of 8, 16-byte aligned rows) the row is read 16 bytes
// at a time for bf16 and fp16, which keeps enough loads in flight; sums and maxima are the same
// either way up to their order. The exponentials use the hardware's ex2 (__expf: a relative error
// of a few units in fp32's last place, far below the bf16 rounding of the gradient).
__device__ void row_max_and_sum_exp(In row, int64_t vocab, bool vectors, float* scratch,
                                    float& max_out, float& sum_out) {
  const int64_t n8 = vectors ? vocab / 8 : 0;
  float m = -INFINITY;
  float s = 0.0f;
  const auto rescale_to = [&](float new_max) {
    if (new_max > m) {
      s *= __expf(m - new_max);  // m = −∞ gives 0, with s still 0
      m = new_max;
    }
  };
#pragma unroll 2
  for (int64_t v = threadIdx.x; v < n8; v += blockDim.x) {
    float x[8];
    load8(row, v, x);
    float group_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < 8; ++j) group_max = fmaxf(group_max, x[j]);
    rescale_to(group_max);
#pragma unroll
    for (int j = 0; j < 8; ++j) s += __expf(x[j] - m);
  }
  for (int64_t i = n8 * 8 + threadIdx.x; i < vocab; i += blockDim.x) {
    const float x = row[i];
    rescale_to(x);
    s += __expf(x - m);
  }
  const float thread_max = m;
  m = block_max(m, scratch);
  // An empty row (or all −∞) keeps m = −∞ and a sum of 0.
  s = block_sum(thread_max == -INFINITY ? 0.0f : s * __expf(thread_max - m), scratch);
  max_out = m;
  sum_out = s;
}

// One row's gradient, (exp(x − m) · inv_sum − onehot(target)) · g, where target is the column
// within the row (none when outside it). drow may alias row: each element is read before it is
// written, by the same thread.
__device__ void write_row_gradient(In row, Out drow, int64_t vocab, bool vectors, float m,
                                   float inv_sum, float g, int64_t target) {
  const int64_t n8 = vectors ? vocab / 8 : 0;
  const float scale = inv_sum * g;
#pragma unroll 4
  for (int64_t v = threadIdx.x; v < n8; v += blockDim.x) {
    float x[8];
    load8(row, v, x);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float p = __expf(x[j] - m) * scale;
      x[j] = v * 8 + j == target ? p - g : p;
    }
    store8(drow, v, x);
  }
  for (int64_t i = n8 * 8 + threadIdx.x; i < vocab; i += blockDim.x) {
    const float p = __expf(row[i] - m) * scale;
    drow[i] = i == target ? p - g : p;
  }
}

__global__ void shard_statistics_kernel(In logits, const int64_t* targets, int64_t rows,
                                        int64_t vocab, int64_t vocab_start, bool vectors,
                                        float* statistics) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  In row = logits + r * vocab;
  float m, s;
  row_max_and_sum_exp(row, vocab, vectors, scratch, m, s);
  if (threadIdx.x == 0) {
    const int64_t local = targets[r] - vocab_start;
    statistics[r] = m;
    statistics[rows + r] = s;
    statistics[2 * rows + r] = local >= 0 && local < vocab ? row[local] : 0.0f;
  }
}

// cpu::cross_entropy_combine, one thread per row; the rescaled sums in double as there.
__global__ void combine_kernel(const float* statistics, int64_t ranks, int64_t rows, float* loss,
                               float* row_max, float* sum_exp) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float max = -INFINITY;
    for (int64_t k = 0; k < ranks; ++k) max = fmaxf(max, statistics[k * 3 * rows + r]);
    double sum = 0.0;
    float target = 0.0f;
    for (int64_t k = 0; k < ranks; ++k) {
      const float* part = statistics + k * 3 * rows;
      if (part[r] != -INFINITY) sum += static_cast<double>(part[rows + r]) * exp(static_cast<double>(part[r]) - max);
      target += part[2 * rows + r];
    }
    row_max[r] = max;
    sum_exp[r] = static_cast<float>(sum);
    loss[r] = (max - target) + logf(sum_exp[r]);
  }
}

__global__ void forward_kernel(In logits, const int64_t* targets, int64_t vocab, bool vectors,
                               float* loss, float* row_max, float* sum_exp) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  In row = logits + r * vocab;
  float m, s;
  row_max_and_sum_exp(row, vocab, vectors, scratch, m, s);
  if (threadIdx.x == 0) {
    const int64_t t = targets[r];
    const float target = t >= 0 && t < vocab ? row[t] : NAN;  // NaN: an id outside the vocabulary
    row_max[r] = m;
    sum_exp[r] = s;
    loss[r] = (m - target) + logf(s);
  }
}

__global__ void backward_kernel(In logits, const int64_t* targets, const float* row_max,
                                const float* sum_exp, const float* dloss, int64_t vocab,
                                int64_t vocab_start, bool vectors, Out dlogits) {
  const int64_t r = blockIdx.x;
  write_row_gradient(logits + r * vocab, dlogits + r * vocab, vocab, vectors, row_max[r],
                     1.0f / sum_exp[r], dloss[r], targets[r] - vocab_start);
}

// forward_kernel then backward_kernel in one block per row: the row is read from memory once
// and again from L2 (a row of the vocabulary is a few hundred KB at most), and the gradient
// replaces the logits (dlogits may alias them: every read of the row, the target logit's too,
// happens before the first write).
__global__ void forward_backward_kernel(In logits, const int64_t* targets, const float* dloss,
                                        int64_t vocab, float* loss, Out dlogits, bool vectors) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  In row = logits + r * vocab;
  float m, s;
  row_max_and_sum_exp(row, vocab, vectors, scratch, m, s);
  const int64_t t = targets[r];
  if (threadIdx.x == 0) {
    const float target = t >= 0 && t < vocab ? row[t] : NAN;  // NaN: an id outside the vocabulary
    loss[r] = (m - target) + logf(s);
  }
  __syncthreads();
  write_row_gradient(row, dlogits + r * vocab, vocab, vectors, m, 1.0f / s, dloss[r], t);
}

__global__ void masked_loss_sum_kernel(const float* loss, const float* mask, int64_t rows,
                                       double* sums, bool accumulate) {
  __shared__ double partial[2][1024];
  double loss_sum = 0.0;
  double tokens = 0.0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    loss_sum += static_cast<double>(loss[r]) * mask[r];
    tokens += mask[r];
  }
  partial[0][threadIdx.x] = loss_sum;
  partial[1][threadIdx.x] = tokens;
  __syncthreads();
  for (int width = blockDim.x / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) {
      partial[0][threadIdx.x] += partial[0][threadIdx.x + width];
      partial[1][threadIdx.x] += partial[1][threadIdx.x + width];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    sums[0] = accumulate ? sums[0] + partial[0][0] : partial[0][0];
    sums[1] = accumulate ? sums[1] + partial[1][0] : partial[1][0];
  }
}

// Whether candidate (v, j) beats the current (value, index); index == cols means none yet.
__device__ __forceinline__ bool better(float v, int64_t j, float value, int64_t index,
                                       int64_t cols) {
  if (j == cols) return false;
  if (index == cols) return true;
  return v > value || (v == value && j < index);
}

// Each row read eight columns at a time from its first 16-byte boundary on (the columns before it
// and the last few singly), whatever the row stride.
__global__ void row_argmax_kernel(In x, int64_t cols, int64_t row_stride, int64_t* out) {
  __shared__ float best_value[32];
  __shared__ int64_t best_index[32];
  In row = x + blockIdx.x * row_stride;
  float value = -INFINITY;
  int64_t index = cols;  // beyond every real index, so a real one wins ties
  // Each thread scans its columns in increasing order and keeps the first strict maximum, as the
  // CPU's scan does; the reduction then prefers the larger value, and the smaller index on ties.
  const auto consider = [&](float candidate, int64_t i) {
    if (index == cols || candidate > value) {
      value = candidate;
      index = i;
    }
  };
  const int64_t size = row.narrow() ? 2 : 4;
  const auto address = reinterpret_cast<uintptr_t>(row.raw());
  const int64_t lead = min(cols, static_cast<int64_t>((16 - address % 16) % 16) / size);
  const int64_t vectors = (cols - lead) / 8;
  if (threadIdx.x < lead) consider(row[threadIdx.x], threadIdx.x);
  const In aligned = row + lead;
  for (int64_t v = threadIdx.x; v < vectors; v += blockDim.x) {
    float e[8];
    load8(aligned, v, e);
#pragma unroll
    for (int j = 0; j < 8; ++j) consider(e[j], lead + 8 * v + j);
  }
  for (int64_t i = lead + 8 * vectors + threadIdx.x; i < cols; i += blockDim.x) consider(row[i], i);
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, value, offset);
    const int64_t j = __shfl_xor_sync(0xffffffffu, index, offset);
    if (better(v, j, value, index, cols)) {
      value = v;
      index = j;
    }
  }
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) {
    best_value[warp] = value;
    best_index[warp] = index;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) {
      if (better(best_value[w], best_index[w], value, index, cols)) {
        value = best_value[w];
        index = best_index[w];
      }
    }
    out[blockIdx.x] = index == cols ? 0 : index;
  }
}

}  // namespace

void cross_entropy_shard_statistics(In logits, const int64_t* targets, int64_t rows,
                                    int64_t vocab, int64_t vocab_start, float* statistics,
                                    cudaStream_t stream) {
  if (rows == 0) return;
  const bool vectors = vectorizable(vocab, {logits.raw()});
  shard_statistics_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      logits, targets, rows, vocab, vocab_start, vectors, statistics);
  MGT_CUDA_CHECK_LAUNCH(shard_statistics_kernel);
}

void cross_entropy_combine(const float* statistics, int64_t ranks, int64_t rows, float* loss,
                           float* row_max, float* sum_exp, cudaStream_t stream) {
  if (rows == 0) return;
  combine_kernel<<<grid_for(rows), kThreads, 0, stream>>>(statistics, ranks, rows, loss, row_max,
                                                          sum_exp);
  MGT_CUDA_CHECK_LAUNCH(combine_kernel);
}

void cross_entropy_forward(In logits, const int64_t* targets, int64_t rows,
                           int64_t vocab, float* loss, float* row_max, float* sum_exp,
                           cudaStream_t stream) {
  if (rows == 0) return;
  const bool vectors = vectorizable(vocab, {logits.raw()});
  forward_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      logits, targets, vocab, vectors, loss, row_max, sum_exp);
  MGT_CUDA_CHECK_LAUNCH(forward_kernel);
}

void cross_entropy_backward(In logits, const int64_t* targets, const float* row_max,
                            const float* sum_exp, const float* dloss, int64_t rows, int64_t vocab,
                            int64_t vocab_start, Out dlogits, cudaStream_t stream) {
  if (rows == 0) return;
  const bool vectors = vectorizable(vocab, {logits.raw(), dlogits.raw()});
  backward_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      logits, targets, row_max, sum_exp, dloss, vocab, vocab_start, vectors, dlogits);
  MGT_CUDA_CHECK_LAUNCH(backward_kernel);
}

void cross_entropy_forward_backward(In logits, const int64_t* targets, const float* dloss,
                                    int64_t rows, int64_t vocab, float* loss, Out dlogits,
                                    cudaStream_t stream) {
  if (rows == 0) return;
  const bool vectors = logits.narrow() && dlogits.type() == logits.type() && vocab % 8 == 0 &&
                       aligned16(logits.raw()) && aligned16(dlogits.raw());
  forward_backward_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
      logits, targets, dloss, vocab, loss, dlogits, vectors);
  MGT_CUDA_CHECK_LAUNCH(forward_backward_kernel);
}

void masked_loss_sum(const float* loss, const float* loss_mask, int64_t rows, double* sums, bool accumulate,
                     cudaStream_t stream) {
  masked_loss_sum_kernel<<<1, 1024, 0, stream>>>(loss, loss_mask, rows, sums, accumulate);
  MGT_CUDA_CHECK_LAUNCH(masked_loss_sum_kernel);
}

void row_argmax(In x, int64_t rows, int64_t cols, int64_t row_stride, int64_t* out, cudaStream_t stream) {
  if (rows == 0) return;
  // A whole vocabulary per row: the widest block, so that each thread scans few columns.
  row_argmax_kernel<<<static_cast<unsigned>(rows), 1024, 0, stream>>>(x, cols, row_stride, out);
  MGT_CUDA_CHECK_LAUNCH(row_argmax_kernel);
}

}  // namespace mgt::cuda
