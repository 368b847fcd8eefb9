#include "train/adamw_optimizer.hpp"

#include <cmath>

#include "core/error.hpp"
#include "kernels/cpu/grad_clip.hpp"

namespace mgt {

namespace {

std::vector<float> read_slice(Backend& backend, ConstFloatView buffer, const ParameterEntry& e) {
  std::vector<float> host(static_cast<std::size_t>(e.numel()));
  backend.copy_to_host(buffer.subspan(e.offset, e.numel()), std::span<float>(host));
  return host;
}

void write_slice(Backend& backend, FloatView buffer, const ParameterEntry& e, std::span<const float> values) {
  if (static_cast<std::int64_t>(values.size()) != e.numel())
    throw Error("optimizer state for '" + e.name + "' has " + std::to_string(values.size()) + " elements, the "
                "parameter has " + std::to_string(e.numel()));
  backend.copy_from_host<float>(values, buffer.subspan(e.offset, e.numel()));
}

}  // namespace

AdamWOptimizer::AdamWOptimizer(GptParameters& params, const AdamWSettings& settings)
    : params_(&params),
      settings_(settings),
      exp_avg_(params.backend(), params.params().size()),
      exp_avg_sq_(params.backend(), params.params().size()) {
  params.backend().fill(exp_avg_.view(), 0.0f);
  params.backend().fill(exp_avg_sq_.view(), 0.0f);
}

OptimizerStep AdamWOptimizer::step(double lr, double weight_decay) {
  Backend& backend = params_->backend();
  OptimizerStep result;
  // The alignment gaps of the buffer are zero, so the whole buffer's sum is the parameters'.
  result.grad_norm = std::sqrt(backend.sum_of_squares(params_->grads()));
  if (!std::isfinite(result.grad_norm)) return result;

  const double coefficient = cpu::clip_coefficient(result.grad_norm, settings_.clip_grad);
  if (coefficient < 1.0) backend.scale(params_->grads(), static_cast<float>(coefficient));

  ++steps_;
  for (const ParameterEntry& e : params_->entries()) {
    AdamWParams hp;
    hp.lr = static_cast<float>(lr);
    hp.beta1 = static_cast<float>(settings_.beta1);
    hp.beta2 = static_cast<float>(settings_.beta2);
    hp.eps = static_cast<float>(settings_.eps);
    hp.weight_decay = e.weight_decay ? static_cast<float>(weight_decay) : 0.0f;
    backend.adamw_step(params_->param(e), params_->grad(e), exp_avg_.view().subspan(e.offset, e.numel()),
                       exp_avg_sq_.view().subspan(e.offset, e.numel()), hp, steps_);
  }
  result.applied = true;
  return result;
}

std::vector<float> AdamWOptimizer::read_exp_avg(const ParameterEntry& e) const {
  return read_slice(params_->backend(), exp_avg_.view(), e);
}

std::vector<float> AdamWOptimizer::read_exp_avg_sq(const ParameterEntry& e) const {
  return read_slice(params_->backend(), exp_avg_sq_.view(), e);
}

void AdamWOptimizer::write_exp_avg(const ParameterEntry& e, std::span<const float> values) {
  write_slice(params_->backend(), exp_avg_.view(), e, values);
}

void AdamWOptimizer::write_exp_avg_sq(const ParameterEntry& e, std::span<const float> values) {
  write_slice(params_->backend(), exp_avg_sq_.view(), e, values);
}

}  // namespace mgt
