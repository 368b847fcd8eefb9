// The MLP's activation between fc1 and fc2, as the dense MLP (mlp.hpp) and each expert
// (moe_experts.hpp) apply it: the erf or tanh GELU, SwiGLU over [gate | up] halves of fc1's
// output, or the squared ReLU; its gradient likewise.
#pragma once
#include <cstdint>

#include "kernels/backend.hpp"
#include "model/gpt_config.hpp"

namespace mgt {

// y ([rows, ffn]) from fc1's output x ([rows, ffn], or [rows, 2·ffn] for SwiGLU).
void mlp_activation_forward(Backend& backend, Activation activation, ConstFloatView x, int64_t rows, int64_t ffn,
                            FloatView y);
// dx (the shape of x) from dy (the shape of y) and the forward's x.
void mlp_activation_backward(Backend& backend, Activation activation, ConstFloatView dy, ConstFloatView x,
                             int64_t rows, int64_t ffn, FloatView dx);

}  // namespace mgt
