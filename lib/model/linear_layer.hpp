// A linear layer y = x·Wᵀ + b whose weight and bias live in the flat parameter buffer. Column-
// and row-parallel variants will add their communication around these calls; the arithmetic on
// the local shard stays the same.
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

private:
  Backend* backend_;
  int64_t in_ = 0;
  int64_t out_ = 0;
  FloatView weight_, weight_grad_;
  FloatView bias_, bias_grad_;  // empty without bias
};

}  // namespace mgt
