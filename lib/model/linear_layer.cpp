#include "model/linear_layer.hpp"

namespace mgt {

LinearLayer::LinearLayer(GptParameters& params, const std::string& weight_name,
                         const std::string& bias_name)
    : backend_(&params.backend()) {
  const ParameterEntry& w = params.entry(weight_name);
  out_ = w.local_shape.at(0);
  in_ = w.local_shape.at(1);
  weight_ = params.compute_param(w);
  weight_grad_ = params.grad(w);
  if (const ParameterEntry* b = params.find(bias_name)) {
    bias_ = params.compute_param(*b);
    bias_grad_ = params.grad(*b);
  }
}

void LinearLayer::forward(ConstFloatView x, int64_t rows, FloatView y) const {
  backend_->linear_forward(x, weight_, bias_, rows, in_, out_, y);
}

void LinearLayer::backward(ConstFloatView dy, ConstFloatView x, int64_t rows, FloatView dx) const {
  backward_weight_and_bias(dy, x, rows);
  if (!dx.empty()) backend_->linear_backward_input(dy, weight_, rows, in_, out_, dx);
}

void LinearLayer::backward_weight_and_bias(ConstFloatView dy, ConstFloatView x, int64_t rows) const {
  backend_->linear_backward_weight(dy, x, rows, in_, out_, weight_grad_);
  if (!bias_grad_.empty()) backend_->bias_backward(dy, rows, out_, bias_grad_);
}

void LinearLayer::forward_gelu_tanh(ConstFloatView x, int64_t rows, FloatView pre, FloatView y) const {
  backend_->linear_gelu_tanh_forward(x, weight_, bias_, rows, in_, out_, pre, y);
}

void LinearLayer::forward_without_bias(ConstFloatView x, int64_t rows, FloatView y) const {
  backend_->linear_forward(x, weight_, {}, rows, in_, out_, y);
}

void LinearLayer::add_bias(FloatView y, int64_t rows) const {
  if (!bias_.empty()) backend_->add_bias(y, bias_, rows, out_);
}

void LinearLayer::backward_weight(ConstFloatView dy, ConstFloatView x, int64_t rows) const {
  backend_->linear_backward_weight(dy, x, rows, in_, out_, weight_grad_);
}

void LinearLayer::backward_bias(ConstFloatView dy, int64_t rows) const {
  if (!bias_grad_.empty()) backend_->bias_backward(dy, rows, out_, bias_grad_);
}

void LinearLayer::backward_input(ConstFloatView dy, int64_t rows, FloatView dx) const {
  backend_->linear_backward_input(dy, weight_, rows, in_, out_, dx);
}

void LinearLayer::backward_input_gelu_tanh(ConstFloatView dy, int64_t rows, ConstFloatView pre,
                                           FloatView dpre) const {
  backend_->linear_backward_input_gelu_tanh(dy, weight_, pre, rows, in_, out_, dpre);
}

}  // namespace mgt
