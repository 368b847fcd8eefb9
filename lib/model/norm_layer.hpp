// LayerNorm or RMSNorm (--normalization) over the hidden dimension, with its weight (and, for
// LayerNorm, bias) in the flat parameter buffer.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/backend.hpp"
#include "model/gpt_parameters.hpp"

namespace mgt {

// Per-row statistics the forward saves for the backward: [rows] each; mean is empty for RMSNorm.
struct NormStats {
  FloatView mean;
  FloatView rstd;
};

class NormLayer {
public:
  // prefix: "decoder.layers.3.input_layernorm", "decoder.final_layernorm", ...
  NormLayer(GptParameters& params, const std::string& prefix);

  bool has_mean() const { return layer_norm_; }
  int64_t hidden() const { return hidden_; }

  void forward(ConstFloatView x, int64_t rows, FloatView y, const NormStats& stats) const;
  // dx overwritten (must not alias dy); weight and bias gradients accumulate.
  void backward(ConstFloatView dy, ConstFloatView x, int64_t rows, const NormStats& stats,
                FloatView dx) const;

private:
  Backend* backend_;
  bool layer_norm_;
  int64_t hidden_;
  float eps_;
  ConstFloatView weight_;  // the compute copy (GptParameters::compute_param)
  FloatView weight_grad_;
  ConstFloatView bias_;  // the compute copy (GptParameters::compute_param)
  FloatView bias_grad_;  // LayerNorm only
};

}  // namespace mgt
