#include "kernels/cuda/linear_fp64.hpp"

#include "kernels/cuda/launch.cuh"

namespace mgt::cuda {
namespace {

__device__ __forceinline__ double warp_sum_double(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// A block per row of x: its warps take the outputs in turn, their lanes the row's elements.
__global__ void forward_kernel(In x, In w, int64_t in, int64_t out, Out y) {
  const int64_t r = blockIdx.x;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int warps = blockDim.x / 32;
  const In row = x + r * in;
  for (int64_t o = warp; o < out; o += warps) {
    const In weights = w + o * in;
    double sum = 0.0;
    for (int64_t i = lane; i < in; i += 32) sum += static_cast<double>(row[i]) * static_cast<double>(weights[i]);
    sum = warp_sum_double(sum);
    if (lane == 0) y[r * out + o] = static_cast<float>(sum);
  }
}

// A thread per element of dx: its sum over the outputs.
__global__ void backward_input_kernel(In dy, In w, int64_t rows, int64_t in, int64_t out, Out dx) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < rows * in;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / in;
    const int64_t i = e % in;
    double sum = 0.0;
    for (int64_t o = 0; o < out; ++o) sum += static_cast<double>(dy[r * out + o]) * static_cast<double>(w[o * in + i]);
    dx[e] = static_cast<float>(sum);
  }
}

// Block (blockIdx.x, o, c): threads over `in`, each summing dy[r, o] · x[r, i] over chunk c's rows.
__global__ void weight_partial_kernel(In dy, In x, int64_t rows, int64_t in, int64_t out, double* partial) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t o = blockIdx.y;
  const int64_t c = blockIdx.z;
  if (i >= in) return;
  const int64_t first = c * kFp64GradientChunkRows;
  const int64_t last = first + kFp64GradientChunkRows < rows ? first + kFp64GradientChunkRows : rows;
  double sum = 0.0;
  for (int64_t r = first; r < last; ++r) sum += static_cast<double>(dy[r * out + o]) * static_cast<double>(x[r * in + i]);
  partial[(c * out + o) * in + i] = sum;
}

__global__ void weight_finish_kernel(const double* partial, int64_t chunks, int64_t n, bool accumulate, Out dw) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double sum = accumulate ? static_cast<double>(In(dw.raw(), dw.type())[e]) : 0.0;
    for (int64_t c = 0; c < chunks; ++c) sum += partial[c * n + e];
    dw[e] = static_cast<float>(sum);
  }
}

}  // namespace

void linear_forward_fp64(In x, In w, int64_t rows, int64_t in, int64_t out, Out y, cudaStream_t stream) {
  if (rows == 0 || out == 0) return;
  forward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, w, in, out, y);
  MGT_CUDA_CHECK_LAUNCH(forward_kernel);
}

void linear_backward_input_fp64(In dy, In w, int64_t rows, int64_t in, int64_t out, Out dx, cudaStream_t stream) {
  if (rows * in == 0) return;
  backward_input_kernel<<<grid_for(rows * in), kThreads, 0, stream>>>(dy, w, rows, in, out, dx);
  MGT_CUDA_CHECK_LAUNCH(backward_input_kernel);
}

void linear_backward_weight_fp64(In dy, In x, int64_t rows, int64_t in, int64_t out, Out dw, bool accumulate,
                                 double* partial, cudaStream_t stream) {
  if (out * in == 0) return;
  const int64_t chunks = weight_gradient_fp64_chunks(rows);
  if (chunks > 0) {
    const dim3 grid(static_cast<unsigned>((in + kThreads - 1) / kThreads), static_cast<unsigned>(out),
                    static_cast<unsigned>(chunks));
    weight_partial_kernel<<<grid, kThreads, 0, stream>>>(dy, x, rows, in, out, partial);
    MGT_CUDA_CHECK_LAUNCH(weight_partial_kernel);
  }
  weight_finish_kernel<<<grid_for(out * in), kThreads, 0, stream>>>(partial, chunks, out * in, accumulate, dw);
  MGT_CUDA_CHECK_LAUNCH(weight_finish_kernel);
}

}  // namespace mgt::cuda
