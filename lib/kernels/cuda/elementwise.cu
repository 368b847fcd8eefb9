#include "kernels/cuda/elementwise.hpp"

#include <cmath>
#include <cstdint>

#include "kernels/philox.hpp"
#include "kernels/cuda/gelu.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vector8.cuh"

namespace mgt::cuda {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;

enum class Op {
  kFill, kCopy, kAdd, kAccumulate, kScale, kGelu, kGeluGrad, kGeluTanh, kGeluTanhGrad, kSquaredRelu, kSquaredReluGrad
};

// out = op(a, b, out) element-wise; `op` is uniform across the launch. kAdd adds c too where
// there is one (c: its value, has_c: whether there is one).
__device__ __forceinline__ float apply(Op op, float a, float b, float o, float value, float c = 0.0f,
                                      bool has_c = false) {
  switch (op) {
    case Op::kFill: return value;
    case Op::kCopy: return a;
    case Op::kAdd: return has_c ? a + b + c : a + b;
    case Op::kAccumulate: return o + a;
    case Op::kScale: return o * value;
    case Op::kGelu: return 0.5f * a * (1.0f + erff(a * kInvSqrt2));
    case Op::kGeluGrad: {  // a = dy, b = x
      const float cdf = 0.5f * (1.0f + erff(b * kInvSqrt2));
      const float pdf = kInvSqrt2Pi * expf(-0.5f * b * b);
      return a * (cdf + b * pdf);
    }
    case Op::kGeluTanh: return gelu_tanh(a);
    case Op::kGeluTanhGrad: return gelu_tanh_grad(a, b);
    case Op::kSquaredRelu: return a > 0.0f ? a * a : 0.0f;
    case Op::kSquaredReluGrad: return b > 0.0f ? a * (2.0f * b) : 0.0f;  // a = dy, b = x
  }
  return 0.0f;
}

bool reads_a(Op op) { return op != Op::kFill && op != Op::kScale; }
bool reads_b(Op op) {
  return op == Op::kAdd || op == Op::kGeluGrad || op == Op::kGeluTanhGrad || op == Op::kSquaredReluGrad;
}
__device__ __forceinline__ bool reads_out(Op op) {
  return op == Op::kAccumulate || op == Op::kScale;
}

// Any types, one element per step of a grid-stride loop; c only for kAdd.
__global__ void map_kernel(Op op, In a, In b, In c, int64_t n, float value, Out out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float x = a != nullptr ? a[i] : 0.0f;
    const float y = b != nullptr ? b[i] : 0.0f;
    const float z = c != nullptr ? c[i] : 0.0f;
    const float o = reads_out(op) ? static_cast<float>(out[i]) : 0.0f;
    out[i] = apply(op, x, y, o, value, z, c != nullptr);
  }
}

// All operands of one 2-byte type (bf16 or fp16): eight elements per thread through 16-byte loads
// and stores (n a multiple of 8, pointers 16-byte aligned), the same arithmetic per element.
__global__ void map_narrow8_kernel(Op op, In a, In b, In c, int64_t vectors, float value, Out out) {
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < vectors;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float x[8] = {}, y[8] = {}, z[8] = {}, o[8] = {};
    if (a != nullptr) load8(a, v, x);
    if (b != nullptr) load8(b, v, y);
    if (c != nullptr) load8(c, v, z);
    if (reads_out(op)) load8(In(out.raw(), out.type()), v, o);
#pragma unroll
    for (int j = 0; j < 8; ++j) o[j] = apply(op, x[j], y[j], o[j], value, z[j], c != nullptr);
    store8(out, v, o);
  }
}

void launch_map(Op op, In a, In b, int64_t n, float value, Out out, cudaStream_t stream, In c = In()) {
  if (n == 0) return;
  if (!reads_a(op)) a = In();
  if (!reads_b(op)) b = In();
  const auto matches = [&](In x) { return x == nullptr || (x.type() == out.type() && aligned16(x.raw())); };
  const bool vector = out.narrow() && n % 8 == 0 && aligned16(out.raw()) && matches(a) && matches(b) && matches(c);
  if (vector) {
    const int64_t vectors = n / 8;
    map_narrow8_kernel<<<grid_for(vectors), kThreads, 0, stream>>>(op, a, b, c, vectors, value, out);
    MGT_CUDA_CHECK_LAUNCH(map_narrow8_kernel);
    return;
  }
  map_kernel<<<grid_for(n), kThreads, 0, stream>>>(op, a, b, c, n, value, out);
  MGT_CUDA_CHECK_LAUNCH(map_kernel);
}

__global__ void add_bias_kernel(Out y, In bias, int64_t n, int64_t cols) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] += bias[i % cols];
  }
}

// Eight elements per thread (cols a multiple of 8, so the eight share a row): the row-parallel
// layers add their bias after the reduction in a pass of its own, which should run at the
// memory's bandwidth.
__global__ void add_bias8_kernel(Out y, In bias, int64_t vectors, int64_t col_vectors) {
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < vectors;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float o[8], b[8];
    load8(In(y.raw(), y.type()), v, o);
    load8(bias, v % col_vectors, b);
#pragma unroll
    for (int j = 0; j < 8; ++j) o[j] += b[j];
    store8(y, v, o);
  }
}

__global__ void masked_loss_grad_kernel(const float* mask, int64_t rows, float scale,
                                        float* dloss) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < rows;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dloss[i] = mask[i] * scale;
  }
}

__device__ __forceinline__ float sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }

__global__ void swiglu_forward_kernel(In x, int64_t rows, int64_t ffn, Out y) {
  const int64_t n = rows * ffn;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / ffn;
    const int64_t c = i % ffn;
    const float gate = x[r * 2 * ffn + c];
    const float up = x[r * 2 * ffn + ffn + c];
    y[i] = gate * sigmoid(gate) * up;
  }
}

__global__ void swiglu_backward_kernel(In dy, In x, int64_t rows, int64_t ffn,
                                       Out dx) {
  const int64_t n = rows * ffn;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / ffn;
    const int64_t c = i % ffn;
    const float a = x[r * 2 * ffn + c];
    const float up = x[r * 2 * ffn + ffn + c];
    const float s = sigmoid(a);
    const float g = dy[i];
    dx[r * 2 * ffn + c] = g * up * s * (1.0f + a * (1.0f - s));
    dx[r * 2 * ffn + ffn + c] = g * a * s;
  }
}

// Eight outputs per thread (ffn a multiple of 8): the gate's and the up projection's eight inputs
// come as two vector loads issued together; the element-wise kernels above move two bytes a load
// and divide a 64-bit index per element, far from the memory's bandwidth on a Llama MLP's rows.
__global__ void swiglu_forward8_kernel(In x, int64_t vectors, int64_t ffn_vectors, Out y) {
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < vectors;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t gate_vector = v + (v / ffn_vectors) * ffn_vectors;  // row r's gate: 2r·ffn/8 + c
    float gate[8], up[8], out[8];
    load8(x, gate_vector, gate);
    load8(x, gate_vector + ffn_vectors, up);
#pragma unroll
    for (int j = 0; j < 8; ++j) out[j] = gate[j] * sigmoid(gate[j]) * up[j];
    store8(y, v, out);
  }
}

__global__ void swiglu_backward8_kernel(In dy, In x, int64_t vectors, int64_t ffn_vectors, Out dx) {
  for (int64_t v = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; v < vectors;
       v += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t gate_vector = v + (v / ffn_vectors) * ffn_vectors;
    float a[8], up[8], g[8], d_gate[8], d_up[8];
    load8(x, gate_vector, a);
    load8(x, gate_vector + ffn_vectors, up);
    load8(dy, v, g);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float s = sigmoid(a[j]);
      d_gate[j] = g[j] * up[j] * s * (1.0f + a[j] * (1.0f - s));
      d_up[j] = g[j] * a[j] * s;
    }
    store8(dx, gate_vector, d_gate);
    store8(dx, gate_vector + ffn_vectors, d_up);
  }
}

// Calls f(block, words) for each Philox block of four consecutive global indices that holds one
// of the n elements from global index key.offset on (see kernels/cpu/dropout.hpp): one thread per
// block, grid-strided.
template <typename F>
__device__ void for_each_philox_block(int64_t n, DropoutKey key, F f) {
  const uint64_t first_block = key.offset / 4;
  const uint64_t last_block = (key.offset + static_cast<uint64_t>(n) + 3) / 4;
  for (uint64_t block = first_block + blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
       block < last_block; block += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    f(block, philox_stream_block(key.seed, key.stream, block));
}

// Calls f(i, word) for each of the n elements from global index key.offset on, with its 32-bit
// Philox word.
template <typename F>
__device__ void for_each_philox_word(int64_t n, DropoutKey key, F f) {
  for_each_philox_block(n, key, [&](uint64_t block, const PhiloxCounter& words) {
    for (int lane = 0; lane < 4; ++lane) {
      const uint64_t j = block * 4 + static_cast<uint64_t>(lane);
      if (j < key.offset || j >= key.offset + static_cast<uint64_t>(n)) continue;
      f(static_cast<int64_t>(j - key.offset), words[lane]);
    }
  });
}

__global__ void dropout_kernel(In x, int64_t n, uint32_t threshold, float keep_scale,
                               DropoutKey key, Out y) {
  for_each_philox_word(n, key, [&](int64_t i, uint32_t word) {
    y[i] = (word >> 8) >= threshold ? x[i] * keep_scale : 0.0f;
  });
}

// y = x · (low + width · u), u from the same words as dropout's.
__global__ void uniform_jitter_kernel(In x, int64_t n, float low, float width, DropoutKey key, Out y) {
  for_each_philox_word(n, key, [&](int64_t i, uint32_t word) {
    // Written as the CPU writes it (no fused multiply-add), so both round alike.
    const float u = __fmul_rn(static_cast<float>(word >> 8), 0x1p-24f);
    y[i] = __fmul_rn(x[i], __fadd_rn(low, __fmul_rn(width, u)));
  });
}

// Box–Muller of each block's two word pairs (kernels/cpu/dropout.hpp standard_normal).
__global__ void standard_normal_kernel(int64_t n, DropoutKey key, Out y) {
  for_each_philox_block(n, key, [&](uint64_t block, const PhiloxCounter& words) {
    for (int pair = 0; pair < 4; pair += 2) {
      const double u1 = (static_cast<double>(words[pair] >> 8) + 1.0) * 0x1p-24;
      const double u2 = static_cast<double>(words[pair + 1] >> 8) * 0x1p-24;
      const double radius = sqrt(-2.0 * log(u1));
      double s = 0.0, c = 0.0;
      sincospi(2.0 * u2, &s, &c);
      for (int odd = 0; odd < 2; ++odd) {
        const uint64_t j = block * 4 + static_cast<uint64_t>(pair + odd);
        if (j < key.offset || j >= key.offset + static_cast<uint64_t>(n)) continue;
        y[static_cast<int64_t>(j - key.offset)] = static_cast<float>(radius * (odd != 0 ? s : c));
      }
    }
  });
}

}  // namespace

void fill(Out x, int64_t n, float value, cudaStream_t stream) {
  // Zero is all-zero bytes in every type: the copy engine's memset writes at full bandwidth.
  if (value == 0.0f && !std::signbit(value)) {
    MGT_CUDA_CHECK(cudaMemsetAsync(x.raw(), 0, static_cast<size_t>(n * x.element_bytes()), stream));
    return;
  }
  launch_map(Op::kFill, nullptr, nullptr, n, value, x, stream);
}
void convert(In x, int64_t n, Out y, cudaStream_t stream) {
  launch_map(Op::kCopy, x, nullptr, n, 0.0f, y, stream);
}
void add(In a, In b, In c, int64_t n, Out out, cudaStream_t stream) {
  launch_map(Op::kAdd, a, b, n, 0.0f, out, stream, c);
}
void accumulate(Out y, In x, int64_t n, cudaStream_t stream) {
  launch_map(Op::kAccumulate, x, nullptr, n, 0.0f, y, stream);
}
void scale(Out x, int64_t n, float factor, cudaStream_t stream) {
  launch_map(Op::kScale, nullptr, nullptr, n, factor, x, stream);
}
void gelu_forward(In x, int64_t n, Out y, cudaStream_t stream) {
  launch_map(Op::kGelu, x, nullptr, n, 0.0f, y, stream);
}
void gelu_backward(In dy, In x, int64_t n, Out dx, cudaStream_t stream) {
  launch_map(Op::kGeluGrad, dy, x, n, 0.0f, dx, stream);
}
void gelu_tanh_forward(In x, int64_t n, Out y, cudaStream_t stream) {
  launch_map(Op::kGeluTanh, x, nullptr, n, 0.0f, y, stream);
}
void gelu_tanh_backward(In dy, In x, int64_t n, Out dx,
                        cudaStream_t stream) {
  launch_map(Op::kGeluTanhGrad, dy, x, n, 0.0f, dx, stream);
}

void squared_relu_forward(In x, int64_t n, Out y, cudaStream_t stream) {
  launch_map(Op::kSquaredRelu, x, nullptr, n, 0.0f, y, stream);
}
void squared_relu_backward(In dy, In x, int64_t n, Out dx, cudaStream_t stream) {
  launch_map(Op::kSquaredReluGrad, dy, x, n, 0.0f, dx, stream);
}

void add_bias(Out y, In bias, int64_t rows, int64_t cols, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  if (vectorizable(cols, {y.raw(), bias.raw()})) {
    add_bias8_kernel<<<grid_for(n / 8), kThreads, 0, stream>>>(y, bias, n / 8, cols / 8);
    MGT_CUDA_CHECK_LAUNCH(add_bias8_kernel);
    return;
  }
  add_bias_kernel<<<grid_for(n), kThreads, 0, stream>>>(y, bias, n, cols);
  MGT_CUDA_CHECK_LAUNCH(add_bias_kernel);
}

void masked_loss_grad(const float* loss_mask, int64_t rows, float scale, float* dloss,
                      cudaStream_t stream) {
  if (rows == 0) return;
  masked_loss_grad_kernel<<<grid_for(rows), kThreads, 0, stream>>>(loss_mask, rows, scale, dloss);
  MGT_CUDA_CHECK_LAUNCH(masked_loss_grad_kernel);
}

void swiglu_forward(In x, int64_t rows, int64_t ffn, Out y, cudaStream_t stream) {
  if (rows * ffn == 0) return;
  if (vectorizable(ffn, {x.raw(), y.raw()})) {
    swiglu_forward8_kernel<<<grid_for(rows * ffn / 8), kThreads, 0, stream>>>(x, rows * ffn / 8, ffn / 8, y);
    MGT_CUDA_CHECK_LAUNCH(swiglu_forward8_kernel);
    return;
  }
  swiglu_forward_kernel<<<grid_for(rows * ffn), kThreads, 0, stream>>>(x, rows, ffn, y);
  MGT_CUDA_CHECK_LAUNCH(swiglu_forward_kernel);
}

void swiglu_backward(In dy, In x, int64_t rows, int64_t ffn, Out dx,
                     cudaStream_t stream) {
  if (rows * ffn == 0) return;
  if (vectorizable(ffn, {dy.raw(), x.raw(), dx.raw()})) {
    swiglu_backward8_kernel<<<grid_for(rows * ffn / 8), kThreads, 0, stream>>>(dy, x, rows * ffn / 8, ffn / 8, dx);
    MGT_CUDA_CHECK_LAUNCH(swiglu_backward8_kernel);
    return;
  }
  swiglu_backward_kernel<<<grid_for(rows * ffn), kThreads, 0, stream>>>(dy, x, rows, ffn, dx);
  MGT_CUDA_CHECK_LAUNCH(swiglu_backward_kernel);
}

void dropout(In x, int64_t n, float p, DropoutKey key, Out y,
             cudaStream_t stream) {
  if (n == 0) return;
  if (p == 0.0f) {
    if (x.raw() != y.raw()) {
      MGT_CUDA_CHECK(cudaMemcpyAsync(y.raw(), x.raw(), static_cast<size_t>(n * y.element_bytes()),
                                     cudaMemcpyDeviceToDevice, stream));
    }
    return;
  }
  // u >= p with u = w·2⁻²⁴ is exactly w >= ceil(p·2²⁴), as on the CPU.
  const auto threshold = static_cast<uint32_t>(std::ceil(static_cast<double>(p) * 16777216.0));
  const int64_t blocks = (n + 4) / 4 + 1;
  dropout_kernel<<<grid_for(blocks), kThreads, 0, stream>>>(x, n, threshold, 1.0f / (1.0f - p),
                                                            key, y);
  MGT_CUDA_CHECK_LAUNCH(dropout_kernel);
}

void standard_normal(int64_t n, DropoutKey key, Out y, cudaStream_t stream) {
  if (n == 0) return;
  const int64_t blocks = (n + 4) / 4 + 1;
  standard_normal_kernel<<<grid_for(blocks), kThreads, 0, stream>>>(n, key, y);
  MGT_CUDA_CHECK_LAUNCH(standard_normal_kernel);
}

void uniform_jitter(In x, int64_t n, float eps, DropoutKey key, Out y, cudaStream_t stream) {
  if (n == 0) return;
  const int64_t blocks = (n + 4) / 4 + 1;
  uniform_jitter_kernel<<<grid_for(blocks), kThreads, 0, stream>>>(x, n, 1.0f - eps, 2.0f * eps, key, y);
  MGT_CUDA_CHECK_LAUNCH(uniform_jitter_kernel);
}

}  // namespace mgt::cuda
