// Megatron's optimizer for --optimizer adam over the model's contiguous buffers: global L2
// gradient norm, skip of a step whose gradients are not finite, clipping by --clip-grad, then
// AdamW per parameter group — Megatron's default groups: weight decay multiplier 0 for biases
// and 1-D tensors (the parameter table's weight_decay flag), 1 otherwise; one learning rate.
//
// The moments live in two buffers with the parameter buffer's layout. On the CPU backend the
// model's fp32 parameters are themselves the master weights; checkpoints store them under the
// master-weight name so that a reduced-precision backend can restore its own master copy.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "model/gpt_parameters.hpp"

namespace mgt {

struct AdamWSettings {
  double beta1 = 0.9;      // --adam-beta1
  double beta2 = 0.999;    // --adam-beta2
  double eps = 1e-8;       // --adam-eps
  double clip_grad = 1.0;  // --clip-grad; 0 disables clipping
};

struct OptimizerStep {
  double grad_norm = 0.0;  // before clipping; NaN or Inf when the step was skipped
  bool applied = false;    // false: gradients not finite, nothing changed
};

class AdamWOptimizer {
public:
  AdamWOptimizer(GptParameters& params, const AdamWSettings& settings);

  // One step on the gradients in the model's gradient buffer (clipped in place). lr and
  // weight_decay come from the scheduler; a group's decay is weight_decay × its multiplier.
  OptimizerStep step(double lr, double weight_decay);

  // Adam's t: steps applied so far (skipped steps do not count).
  std::int64_t steps() const { return steps_; }
  void set_steps(std::int64_t steps) { steps_ = steps; }
  const AdamWSettings& settings() const { return settings_; }

  // Host copies of one tensor's moments, for checkpoints; writes check the size.
  std::vector<float> read_exp_avg(const ParameterEntry& e) const;
  std::vector<float> read_exp_avg_sq(const ParameterEntry& e) const;
  void write_exp_avg(const ParameterEntry& e, std::span<const float> values);
  void write_exp_avg_sq(const ParameterEntry& e, std::span<const float> values);

private:
  GptParameters* params_;
  AdamWSettings settings_;
  DeviceBuffer exp_avg_;
  DeviceBuffer exp_avg_sq_;
  std::int64_t steps_ = 0;
};

}  // namespace mgt
