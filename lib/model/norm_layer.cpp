#include "model/norm_layer.hpp"

namespace mgt {

NormLayer::NormLayer(GptParameters& params, const std::string& prefix)
    : backend_(&params.backend()),
      layer_norm_(params.config().normalization == Normalization::kLayerNorm),
      hidden_(params.config().hidden_size),
      eps_(static_cast<float>(params.config().norm_epsilon)) {
  const ParameterEntry& w = params.entry(prefix + ".weight");
  weight_ = params.compute_param(w);
  weight_grad_ = params.grad(w);
  if (layer_norm_) {
    const ParameterEntry& b = params.entry(prefix + ".bias");
    bias_ = params.compute_param(b);
    bias_grad_ = params.grad(b);
  }
}

void NormLayer::forward(ConstFloatView x, int64_t rows, FloatView y, const NormStats& stats) const {
  if (layer_norm_) {
    backend_->layer_norm_forward(x, weight_, bias_, rows, hidden_, eps_, y, stats.mean, stats.rstd);
  } else {
    backend_->rms_norm_forward(x, weight_, rows, hidden_, eps_, y, stats.rstd);
  }
}

void NormLayer::backward(ConstFloatView dy, ConstFloatView x, int64_t rows, const NormStats& stats,
                         FloatView dx) const {
  if (layer_norm_) {
    backend_->layer_norm_backward(dy, x, weight_, stats.mean, stats.rstd, rows, hidden_, dx,
                                  weight_grad_, bias_grad_);
  } else {
    backend_->rms_norm_backward(dy, x, weight_, stats.rstd, rows, hidden_, dx, weight_grad_);
  }
}

}  // namespace mgt
