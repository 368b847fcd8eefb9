// Megatron's gradient scalers for --fp16 (megatron/core/optimizer/grad_scaler.py): the loss
// gradient is multiplied by the scale before the backward, so that small gradients survive fp16,
// and the reduced gradients by 1 / scale before the norm, the clipping and the step.
//
//   constant  (--loss-scale S): ConstantGradScaler, S forever.
//   dynamic   DynamicGradScaler with growth factor 2 and backoff factor 0.5: from
//             --initial-loss-scale; after an overflow step (gradients not finite) the growth
//             count restarts and the hysteresis count drops, and once it reaches 0 the scale
//             halves (not below --min-loss-scale); after --loss-scale-window good steps in a
//             row the scale doubles and the hysteresis count is back to --hysteresis.
//
// Megatron holds the scale in an fp32 tensor; so does this class, so that a scale read from the
// flags rounds as Megatron's does and every halving and doubling is the same float.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace mgt {

struct OptimizationOptions;

struct LossScalerSettings {
  std::optional<double> constant_scale;    // --loss-scale: no dynamic scaling
  double initial_scale = 4294967296.0;     // --initial-loss-scale (2^32)
  double min_scale = 1.0;                  // --min-loss-scale
  std::int64_t window = 1000;              // --loss-scale-window
  std::int64_t hysteresis = 2;             // --hysteresis
};

// What a checkpoint keeps of a scaler: Megatron's DynamicGradScaler.state_dict() keys.
struct LossScalerState {
  float scale = 1.0f;
  std::int64_t growth_tracker = 0;
  std::int64_t hysteresis_tracker = 0;
};

class LossScaler {
public:
  explicit LossScaler(const LossScalerSettings& settings);

  bool dynamic() const { return !settings_.constant_scale; }
  float scale() const { return state_.scale; }
  // Megatron's inv_scale: the reciprocal taken in double, then rounded to fp32.
  float inverse_scale() const { return static_cast<float>(1.0 / static_cast<double>(state_.scale)); }
  // Whether a dynamic scale is down to --min-loss-scale (an overflow cannot lower it further).
  bool at_minimum() const { return state_.scale <= min_scale_; }

  // After each iteration: whether its gradients held an Inf or NaN (the step was skipped).
  void update(bool found_inf);

  LossScalerState state() const { return state_; }
  // A constant scaler keeps its flag's scale: Megatron's ConstantGradScaler saves and loads
  // nothing, so a resumed run may change --loss-scale.
  void load_state(const LossScalerState& state) {
    if (dynamic()) state_ = state;
  }

private:
  LossScalerSettings settings_;
  float min_scale_;
  LossScalerState state_;
};

// The scaler a run uses, by Megatron's get_megatron_optimizer: --loss-scale gives a constant one
// (under --fp16, and also under --bf16 or --use-distributed-optimizer, as Megatron does); --fp16
// without it a dynamic one; otherwise none (the log line's loss scale is 1.0).
std::optional<LossScalerSettings> loss_scaler_settings(const OptimizationOptions& optim,
                                                       bool use_distributed_optimizer);

// The state as the JSON object a training checkpoint carries ({"scale": …, "growth_tracker": …,
// "hysteresis_tracker": …}), and back; parsing throws mgt::Error naming `what` and the key.
std::string loss_scaler_state_json(const LossScalerState& state);
LossScalerState parse_loss_scaler_state_json(const std::string& text, const std::string& what);

}  // namespace mgt
