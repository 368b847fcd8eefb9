// Megatron's tanh GELU (kernels/cpu/gelu.hpp) for device code: the element-wise kernels and the
// epilogues that apply it must round alike.
#pragma once
#include <cmath>

namespace mgt::cuda {

constexpr float kGeluTanhScale = 0.79788456f;
constexpr float kGeluTanhCubic = 0.044715f;

// 0.5·(1 + tanh(u)) = σ(2u) = 1 / (1 + e^(−2u)) for u = 0.79788456·x·(1 + 0.044715x²), with the
// hardware's exponential and division (ex2.approx, rcp.approx): about a third of tanhf's
// instructions, which had made the FP8 casts that apply the GELU compute-bound. Relative error
// about 1e-6 against the CPU's std::tanh, far below bf16's rounding; e^(−2u) overflowing (x far
// below zero) gives σ = 0, as tanh's saturation gives.
__device__ __forceinline__ float gelu_sigmoid(float x) {
  const float u = kGeluTanhScale * x * (1.0f + kGeluTanhCubic * x * x);
  return __fdividef(1.0f, 1.0f + __expf(-2.0f * u));
}

__device__ __forceinline__ float gelu_tanh(float x) { return x * gelu_sigmoid(x); }

// dy · gelu_tanh'(x): the element-wise backward and the FP8 gradient cast that fuses it. With
// s = σ(2u): 0.5·(1 + tanh u) = s and 1 − tanh² u = 4s(1 − s), so the derivative
// 0.5·(1 + tanh u) + 0.5·x·(1 − tanh² u)·u' is s + 2x·s(1 − s)·u'.
__device__ __forceinline__ float gelu_tanh_grad(float dy, float x) {
  const float s = gelu_sigmoid(x);
  const float du = kGeluTanhScale * (1.0f + 3.0f * kGeluTanhCubic * x * x);
  return dy * (s + 2.0f * x * s * (1.0f - s) * du);
}

}  // namespace mgt::cuda
