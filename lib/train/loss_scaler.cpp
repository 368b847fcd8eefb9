#include "train/loss_scaler.hpp"

#include <algorithm>

#include "core/json_scalars.hpp"
#include "core/json_text.hpp"
#include "train/train_options.hpp"

namespace mgt {

LossScaler::LossScaler(const LossScalerSettings& settings)
    : settings_(settings),
      min_scale_(static_cast<float>(settings.min_scale)),
      state_{static_cast<float>(settings.constant_scale.value_or(settings.initial_scale)), 0, settings.hysteresis} {}

// DynamicGradScaler.update, step for step.
void LossScaler::update(bool found_inf) {
  if (!dynamic()) return;
  if (found_inf) {
    state_.growth_tracker = 0;
    state_.hysteresis_tracker -= 1;
    if (state_.hysteresis_tracker <= 0) state_.scale = std::max(state_.scale * 0.5f, min_scale_);
    return;
  }
  state_.growth_tracker += 1;
  if (state_.growth_tracker == settings_.window) {
    state_.growth_tracker = 0;
    state_.hysteresis_tracker = settings_.hysteresis;
    state_.scale = state_.scale * 2.0f;
  }
}

std::optional<LossScalerSettings> loss_scaler_settings(const OptimizationOptions& optim,
                                                       bool use_distributed_optimizer) {
  const bool fp16 = optim.precision == Precision::Fp16;
  // megatron/core/optimizer/__init__.py: the mixed-precision optimizers (and the distributed
  // one, whatever the precision) take a constant scaler for --loss-scale, a dynamic one under
  // fp16 otherwise; the plain fp32 optimizer takes none.
  const bool mixed = fp16 || optim.precision == Precision::Bf16 || use_distributed_optimizer;
  if (!mixed || (!fp16 && !optim.loss_scale)) return std::nullopt;
  LossScalerSettings s;
  s.constant_scale = optim.loss_scale;
  s.initial_scale = optim.initial_loss_scale;
  s.min_scale = optim.min_loss_scale;
  s.window = optim.loss_scale_window;
  s.hysteresis = optim.hysteresis;
  return s;
}

std::string loss_scaler_state_json(const LossScalerState& state) {
  return "{\"scale\": " + python_float_repr(state.scale) + ", \"growth_tracker\": " +
         std::to_string(state.growth_tracker) + ", \"hysteresis_tracker\": " + std::to_string(state.hysteresis_tracker) +
         "}";
}

LossScalerState parse_loss_scaler_state_json(const std::string& text, const std::string& what) {
  const JsonScalars scalars(text, what);
  LossScalerState state;
  // The float's value was written exactly (a float widens to double without rounding).
  state.scale = static_cast<float>(scalars.real("scale"));
  state.growth_tracker = scalars.integer("growth_tracker");
  state.hysteresis_tracker = scalars.integer("hysteresis_tracker");
  return state;
}

}  // namespace mgt
