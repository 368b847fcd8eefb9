#include "model/mlp_activation.hpp"

namespace mgt {

void mlp_activation_forward(Backend& backend, Activation activation, ConstFloatView x, int64_t rows, int64_t ffn,
                            FloatView y) {
  switch (activation) {
    case Activation::kGelu:
      backend.gelu_forward(x, y);
      break;
    case Activation::kOpenaiGelu:
      backend.gelu_tanh_forward(x, y);
      break;
    case Activation::kSwiglu:
      backend.swiglu_forward(x, rows, ffn, y);
      break;
    case Activation::kSquaredRelu:
      backend.squared_relu_forward(x, y);
      break;
  }
}

void mlp_activation_backward(Backend& backend, Activation activation, ConstFloatView dy, ConstFloatView x,
                             int64_t rows, int64_t ffn, FloatView dx) {
  switch (activation) {
    case Activation::kGelu:
      backend.gelu_backward(dy, x, dx);
      break;
    case Activation::kOpenaiGelu:
      backend.gelu_tanh_backward(dy, x, dx);
      break;
    case Activation::kSwiglu:
      backend.swiglu_backward(dy, x, rows, ffn, dx);
      break;
    case Activation::kSquaredRelu:
      backend.squared_relu_backward(dy, x, dx);
      break;
  }
}

}  // namespace mgt
