// Megatron's tanh GELU (kernels/cpu/gelu.hpp) for device code: the element-wise kernels and the
// FP8 casts that apply it share these, so that their results agree bit for bit.
#pragma once

namespace mgt::cuda {

// 0.5·(1 + tanh(u)) = σ(2u) = 1 / (1 + 2^t) for u = 0.79788456·x·(1 + 0.044715x²) and
// t = −2u·log2(e) = x·(kExp2Linear + kExp2Cubic·x²): the constants folded (three instructions for
// t where the unfolded product took five), then the hardware's base-2 exponential and reciprocal
// (ex2.approx, rcp.approx). An FP8 cast that applies the GELU is bound by its instruction count.
// Relative error about 1e-6 against the CPU's std::tanh, far below bf16's rounding. 2^t
// overflowing (x far below zero) gives σ = 0, underflowing (flushed to zero) σ = 1, as tanh's
// saturation gives.
constexpr float kGeluExp2Linear = static_cast<float>(-2.0 * 0.79788456 * 1.4426950408889634);
constexpr float kGeluExp2Cubic = static_cast<float>(-2.0 * 0.79788456 * 0.044715 * 1.4426950408889634);
// 2u' = 2·0.79788456·(1 + 3·0.044715x²) = kTwoSlope + kTwoSlopeCubic·x².
constexpr float kGeluTwoSlope = static_cast<float>(2.0 * 0.79788456);
constexpr float kGeluTwoSlopeCubic = static_cast<float>(2.0 * 0.79788456 * 3.0 * 0.044715);

// 2^t, flushing a subnormal result to zero (one MUFU.EX2; exp2f and __expf add range fix-ups).
__device__ __forceinline__ float exp2_flushed(float t) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(t));
  return r;
}

// σ(2u) of x, given x².
__device__ __forceinline__ float gelu_sigmoid(float x, float x2) {
  return __fdividef(1.0f, 1.0f + exp2_flushed(x * fmaf(kGeluExp2Cubic, x2, kGeluExp2Linear)));
}

__device__ __forceinline__ float gelu_tanh(float x) { return x * gelu_sigmoid(x, x * x); }

// dy · gelu_tanh'(x): the element-wise backward and the FP8 gradient cast that fuses it. With
// s = σ(2u): 0.5·(1 + tanh u) = s and 1 − tanh² u = 4s(1 − s), so the derivative
// 0.5·(1 + tanh u) + 0.5·x·(1 − tanh² u)·u' is s + x·2u'·s(1 − s), s(1 − s) formed as s − s²
// in one rounding.
__device__ __forceinline__ float gelu_tanh_grad(float dy, float x) {
  const float x2 = x * x;
  const float s = gelu_sigmoid(x, x2);
  const float two_du = fmaf(kGeluTwoSlopeCubic, x2, kGeluTwoSlope);
  return dy * fmaf(x * two_du, fmaf(-s, s, s), s);
}

}  // namespace mgt::cuda
