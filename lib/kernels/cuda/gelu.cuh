// Megatron's tanh GELU (kernels/cpu/gelu.hpp) for device code: the element-wise kernels and the
// epilogues that apply it must round alike.
#pragma once
#include <cmath>

namespace mgt::cuda {

constexpr float kGeluTanhScale = 0.79788456f;
constexpr float kGeluTanhCubic = 0.044715f;

__device__ __forceinline__ float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(kGeluTanhScale * x * (1.0f + kGeluTanhCubic * x * x)));
}

// dy · gelu_tanh'(x): the element-wise backward and the FP8 gradient cast that fuses it.
__device__ __forceinline__ float gelu_tanh_grad(float dy, float x) {
  const float t = tanhf(kGeluTanhScale * x * (1.0f + kGeluTanhCubic * x * x));
  const float du = kGeluTanhScale * (1.0f + 3.0f * kGeluTanhCubic * x * x);
  return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
}

}  // namespace mgt::cuda
