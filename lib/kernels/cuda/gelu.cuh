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

}  // namespace mgt::cuda
