// SwiGLU (--swiglu): fc1 produces [rows, 2f] = [gate | up] per row (Megatron's chunk(2, dim=-1));
// the activation is silu(gate) · up with silu(a) = a·σ(a).
#pragma once
#include <cstdint>

namespace mgt::cpu {

// x: [rows, 2·ffn]; y: [rows, ffn].
void swiglu_forward(const float* x, int64_t rows, int64_t ffn, float* y);

// dy: [rows, ffn]; x: the forward input; dx: [rows, 2·ffn], overwritten.
void swiglu_backward(const float* dy, const float* x, int64_t rows, int64_t ffn, float* dx);

}  // namespace mgt::cpu
