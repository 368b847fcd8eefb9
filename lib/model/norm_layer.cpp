#include "model/norm_layer.hpp"

namespace mgt {

NormLayer::NormLayer(GptParameters& params, const std::string& prefix, int64_t hidden)
    : backend_(&params.backend()),
      params_(&params),
      layer_norm_(params.config().normalization == Normalization::kLayerNorm),
      hidden_(hidden > 0 ? hidden : params.config().hidden_size),
      eps_(static_cast<float>(params.config().norm_epsilon)) {
  const ParameterEntry& w = params.entry(prefix + ".weight");
  weight_ = params.compute_param(w);
  weight_grad_ = params.grad(w);
  weight_entry_ = &w;
  params.defer_grad_zeroing(w);
  if (layer_norm_) {
    const ParameterEntry& b = params.entry(prefix + ".bias");
    bias_ = params.compute_param(b);
    bias_grad_ = params.grad(b);
    bias_entry_ = &b;
    params.defer_grad_zeroing(b);
  }
  if (params.config().layernorm_zero_centered_gamma) {
    stored_weight_ = static_cast<const GptParameters&>(params).param(w);
    one_plus_weight_ = DeviceBuffer(params.backend(), hidden_, weight_.type());
  }
}

ConstFloatView NormLayer::effective_weight() const {
  if (one_plus_weight_.empty()) return weight_;
  if (!one_plus_valid_ || one_plus_version_ != params_->params_version()) {
    // 1 + w summed in fp32 from the fp32 parameters, then stored in the compute type (a bf16
    // buffer rounds the sum once, as the compute copy rounds w).
    backend_->fill(one_plus_weight_.view(), 1.0f);
    backend_->accumulate(one_plus_weight_.view(), stored_weight_);
    one_plus_version_ = params_->params_version();
    one_plus_valid_ = true;
  }
  return one_plus_weight_.view();
}

void NormLayer::forward(ConstFloatView x, int64_t rows, FloatView y, const NormStats& stats) const {
  const ConstFloatView weight = effective_weight();
  if (layer_norm_) {
    backend_->layer_norm_forward(x, weight, bias_, rows, hidden_, eps_, y, stats.mean, stats.rstd);
  } else {
    backend_->rms_norm_forward(x, weight, rows, hidden_, eps_, y, stats.rstd);
  }
}

void NormLayer::add_forward(ConstFloatView a, ConstFloatView b, FloatView sum, int64_t rows, FloatView y,
                            const NormStats& stats, ConstFloatView c) const {
  backend_->add_norm_forward(a, b, sum, effective_weight(), layer_norm_ ? bias_ : ConstFloatView(), rows, hidden_,
                             eps_, y, layer_norm_ ? stats.mean : FloatView(), stats.rstd, c);
}

void NormLayer::fp8_forward(ConstFloatView x, int64_t rows, const Fp8Scaling& scaling, Fp8View y,
                            const NormStats& stats) const {
  fp8_add_forward(x, {}, {}, rows, scaling, y, stats);
}

void NormLayer::fp8_add_forward(ConstFloatView a, ConstFloatView b, FloatView sum, int64_t rows,
                                const Fp8Scaling& scaling, Fp8View y, const NormStats& stats, ConstFloatView c) const {
  backend_->fp8_norm_forward(a, b, sum, effective_weight(), layer_norm_ ? bias_ : ConstFloatView(), rows, hidden_,
                             eps_, scaling, y, layer_norm_ ? stats.mean : FloatView(), stats.rstd, c);
}

bool NormLayer::param_grads_accumulate() const {
  const bool weight = params_->grad_write_accumulates(*weight_entry_);
  if (bias_entry_ == nullptr) return weight;
  const bool bias = params_->grad_write_accumulates(*bias_entry_);
  if (weight == bias) return weight;
  // Written apart before (never so far): the one not written yet is zeroed, both are added to.
  backend_->fill(weight ? bias_grad_ : weight_grad_, 0.0f);
  return true;
}

void NormLayer::backward(ConstFloatView dy, ConstFloatView x, int64_t rows, const NormStats& stats,
                         FloatView dx, bool accumulate_dx) const {
  const ConstFloatView weight = effective_weight();
  const bool accumulate_params = param_grads_accumulate();
  if (layer_norm_) {
    backend_->layer_norm_backward(dy, x, weight, stats.mean, stats.rstd, rows, hidden_, dx,
                                  weight_grad_, bias_grad_, accumulate_dx, accumulate_params);
  } else {
    backend_->rms_norm_backward(dy, x, weight, stats.rstd, rows, hidden_, dx, weight_grad_, accumulate_dx,
                                accumulate_params);
  }
}

}  // namespace mgt
