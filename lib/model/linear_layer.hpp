// A linear layer y = x·Wᵀ + b whose weight and bias live in the flat parameter buffer: the
// arithmetic on one rank's shard. The column- and row-parallel layers (parallel_linear.hpp) add
// their communication around these calls.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/backend.hpp"
#include "model/gpt_parameters.hpp"

namespace mgt {

class LinearLayer {
public:
  // bias_name may name a tensor that does not exist (--disable-bias-linear): no bias then.
  LinearLayer(GptParameters& params, const std::string& weight_name, const std::string& bias_name);

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

  // y[rows, out] = x[rows, in]·Wᵀ + b.
  void forward(ConstFloatView x, int64_t rows, FloatView y) const;
  // dW += dyᵀ·x, db += Σ dy; dx = dy·W unless dx is empty.
  void backward(ConstFloatView dy, ConstFloatView x, int64_t rows, FloatView dx) const;
  // Followed by Megatron's fused bias-GELU: pre = x·Wᵀ + b, y = gelu_tanh(pre).
  void forward_gelu_tanh(ConstFloatView x, int64_t rows, FloatView pre, FloatView y) const;

  // The steps separately, for a layer whose bias is added after a reduction.
  bool has_bias() const { return !bias_.empty(); }
  // y[rows, out] = x·Wᵀ.
  void forward_without_bias(ConstFloatView x, int64_t rows, FloatView y) const;
  // y[rows, out] += b (nothing without bias).
  void add_bias(FloatView y, int64_t rows) const;
  // dW += dyᵀ·x.
  void backward_weight(ConstFloatView dy, ConstFloatView x, int64_t rows) const;
  // db += Σ dy over `rows` rows (nothing without bias).
  void backward_bias(ConstFloatView dy, int64_t rows) const;
  // dW += dyᵀ·x and db += Σ dy (without bias, dW alone).
  void backward_weight_and_bias(ConstFloatView dy, ConstFloatView x, int64_t rows) const;
  // dx = dy·W.
  void backward_input(ConstFloatView dy, int64_t rows, FloatView dx) const;
  // The input gradient through the tanh GELU that made this layer's input from pre:
  // dpre = (dy·W) ⊙ gelu_tanh'(pre).
  void backward_input_gelu_tanh(ConstFloatView dy, int64_t rows, ConstFloatView pre, FloatView dpre) const;

private:
  Backend* backend_;
  int64_t in_ = 0;
  int64_t out_ = 0;
  ConstFloatView weight_;  // the compute copy (GptParameters::compute_param)
  FloatView weight_grad_;
  ConstFloatView bias_;  // the compute copy (GptParameters::compute_param)
  FloatView bias_grad_;  // empty without bias
};

}  // namespace mgt
