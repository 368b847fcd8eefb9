// LayerNorm or RMSNorm (--normalization) over the hidden dimension (or over each head, for the
// query and key norms), with its weight (and, for LayerNorm, bias) in the flat parameter buffer.
//
// With --apply-layernorm-1p (GptConfig::layernorm_zero_centered_gamma) the stored weight w is
// zero-centred and the norm scales by 1 + w (Megatron's zero_centered_gamma,
// megatron/core/fusions/fused_layer_norm.py and TENorm). The layer keeps 1 + w in a buffer of
// its own, in the type the layers compute with, made from the fp32 parameters (the source of the
// compute copy) whenever they have changed since (GptParameters::params_version); the kernels
// see an ordinary weight. Since ∂(1 + w)/∂w = 1, the gradient the kernels accumulate for the
// effective weight is the stored weight's.
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
  // prefix: "decoder.layers.3.input_layernorm", "decoder.final_layernorm", ...; `hidden`: the
  // width normalised, the model's hidden size unless given (a head's for --qk-layernorm).
  NormLayer(GptParameters& params, const std::string& prefix, int64_t hidden = 0);

  bool has_mean() const { return layer_norm_; }
  int64_t hidden() const { return hidden_; }

  void forward(ConstFloatView x, int64_t rows, FloatView y, const NormStats& stats) const;
  // sum = a + b (a residual connection), or a + b + c where c is given, then the norm of sum
  // into y.
  void add_forward(ConstFloatView a, ConstFloatView b, FloatView sum, int64_t rows, FloatView y,
                   const NormStats& stats, ConstFloatView c = {}) const;
  // forward and add_forward with the output cast to FP8 instead of written (Backend::
  // fp8_norm_forward): rowwise codes [rows, hidden] with `scaling` into y, as the norm's output
  // followed by fp8_quantize would give them.
  void fp8_forward(ConstFloatView x, int64_t rows, const Fp8Scaling& scaling, Fp8View y, const NormStats& stats) const;
  void fp8_add_forward(ConstFloatView a, ConstFloatView b, FloatView sum, int64_t rows, const Fp8Scaling& scaling,
                       Fp8View y, const NormStats& stats, ConstFloatView c = {}) const;
  // dx overwritten (must not alias dy), or with accumulate_dx added to (a residual's gradient);
  // weight and bias gradients accumulate, except in an iteration's first backward, which writes
  // over them (their zeroing is deferred: GptParameters::defer_grad_zeroing).
  void backward(ConstFloatView dy, ConstFloatView x, int64_t rows, const NormStats& stats,
                FloatView dx, bool accumulate_dx = false) const;

  // The weight the kernels scale by: the compute copy of w, or 1 + w when zero-centred.
  ConstFloatView effective_weight() const;

private:
  // Whether this backward adds to the weight's and bias's gradients (GptParameters::
  // grad_write_accumulates, asked once per backward for each).
  bool param_grads_accumulate() const;

  Backend* backend_;
  GptParameters* params_;
  const ParameterEntry* weight_entry_;
  const ParameterEntry* bias_entry_ = nullptr;  // LayerNorm only
  bool layer_norm_;
  int64_t hidden_;
  float eps_;
  ConstFloatView weight_;  // the compute copy (GptParameters::compute_param)
  FloatView weight_grad_;
  ConstFloatView bias_;  // the compute copy (GptParameters::compute_param)
  FloatView bias_grad_;  // LayerNorm only
  // --apply-layernorm-1p only: the stored weight and 1 + w as of params_version one_plus_version_.
  ConstFloatView stored_weight_;
  mutable DeviceBuffer one_plus_weight_;
  mutable std::uint64_t one_plus_version_ = 0;
  mutable bool one_plus_valid_ = false;
};

}  // namespace mgt
