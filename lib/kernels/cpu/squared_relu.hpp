// The squared ReLU of --squared-relu (megatron/training/activations.py squared_relu:
// torch.pow(F.relu(x), 2); Nemotron-4's MLP) and its gradient 2·relu(x), as autograd takes it
// (0 at x = 0).
#pragma once
#include <cstdint>

namespace mgt::cpu {

// y[n] = relu(x)²; y may alias x.
void squared_relu_forward(const float* x, int64_t n, float* y);
// dx[n] = dy · 2·relu(x); x is the forward input. dx may alias dy.
void squared_relu_backward(const float* dy, const float* x, int64_t n, float* dx);

}  // namespace mgt::cpu
