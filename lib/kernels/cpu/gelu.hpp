// The two GELU forms Megatron uses. gelu is the exact erf form x·Φ(x) (torch's default, HF
// "gelu"); gelu_tanh is the tanh approximation 0.5x(1 + tanh(0.79788456·x·(1 + 0.044715x²)))
// that Megatron's fused bias-GELU and --openai-gelu compute. The constants are Megatron's own
// (0.79788456 ≈ √(2/π)), so results track its kernels rather than a more precise √(2/π).
#pragma once
#include <cstdint>

namespace mgt::cpu {

// y[n] = gelu(x[n]); y may alias x.
void gelu_forward(const float* x, int64_t n, float* y);
// dx[n] = dy · gelu'(x); x is the forward input. dx may alias dy.
void gelu_backward(const float* dy, const float* x, int64_t n, float* dx);

void gelu_tanh_forward(const float* x, int64_t n, float* y);
void gelu_tanh_backward(const float* dy, const float* x, int64_t n, float* dx);

}  // namespace mgt::cpu
