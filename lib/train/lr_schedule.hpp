// Megatron's OptimizerParamScheduler (megatron/core/optimizer_param_scheduler.py): the learning
// rate and weight decay as functions of the number of samples trained, with the same floating
// point operations in the same order, so the values match Megatron's bit for bit.
//
// Steps count samples: each successful iteration calls step(global batch size); a skipped
// iteration (fp16 overflow) does not step.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace mgt {

struct TrainOptions;

struct LrScheduleConfig {
  double init_lr = 0.0;            // --lr-warmup-init
  double max_lr = 0.0;             // --lr
  double min_lr = 0.0;             // --min-lr
  double lr_warmup_steps = 0.0;    // samples; fractional with --lr-warmup-fraction, as in Megatron
  std::int64_t lr_decay_steps = 0; // samples
  std::string lr_decay_style = "linear";  // constant | linear | cosine | inverse-square-root | WSD
  double start_wd = 0.01;
  double end_wd = 0.01;
  std::int64_t wd_incr_steps = 0;  // samples
  std::string wd_incr_style = "constant";  // constant | linear | cosine
  std::optional<std::int64_t> wsd_decay_steps;  // samples; required by WSD
  std::string lr_wsd_decay_style = "exponential";  // exponential | linear | cosine | minus_sqrt
};

// training.py get_optimizer_param_scheduler: iteration-based runs convert --lr-decay-iters
// (default --train-iters), --lr-warmup-iters and --lr-wsd-decay-iters to samples with the
// global batch size and take wd_incr_steps = train_iters × gbs; sample-based runs take the
// *-samples flags as they are. --lr-warmup-fraction is a fraction of the decay steps.
// `options` must have been validated.
LrScheduleConfig lr_schedule_config(const TrainOptions& options);

// What Megatron's state_dict() holds, with its key names. Checkpoints store it.
struct LrSchedulerState {
  double max_lr = 0.0;
  double lr_warmup_steps = 0.0;
  std::int64_t num_steps = 0;
  std::string lr_decay_style;
  std::int64_t lr_decay_steps = 0;
  double min_lr = 0.0;
  double start_wd = 0.0;
  double end_wd = 0.0;
  std::string wd_incr_style;
  std::int64_t wd_incr_steps = 0;
};

// On resume, how checkpoint values meet the flags (Megatron's _check_and_set):
enum class SchedulerResume {
  RequireMatch,   // default: a difference is an error; checkpoint values are used
  UseCheckpoint,  // --use-checkpoint-opt_param-scheduler: checkpoint values win
  Override,       // --override-opt_param-scheduler: the flags win
};

class OptimizerParamScheduler {
public:
  // Throws mgt::Error where Megatron asserts (min_lr < 0, warmup >= decay, WSD without its
  // decay steps, ...).
  explicit OptimizerParamScheduler(const LrScheduleConfig& config);

  // Advances by `increment` samples (Megatron: num_microbatches × micro batch × DP).
  void step(std::int64_t increment);

  // The learning rate now; a parameter group with its own max/min lr (Megatron's per-group
  // overrides, e.g. --decoupled-lr) passes them.
  double lr() const { return lr(config_.max_lr, config_.min_lr); }
  double lr(double max_lr, double min_lr) const;
  // The weight decay now, before a group's wd_mult (0 for biases and norms by default).
  double weight_decay() const { return weight_decay(config_.start_wd, config_.end_wd); }
  double weight_decay(double start_wd, double end_wd) const;

  std::int64_t num_steps() const { return num_steps_; }
  const LrScheduleConfig& config() const { return config_; }

  LrSchedulerState state() const;
  // Megatron's load_state_dict: checks or takes each value per `resume`, then steps by the
  // checkpoint's num_steps (so call it on a scheduler that has not stepped yet). Throws
  // mgt::Error naming the value that differs under RequireMatch.
  void load_state(const LrSchedulerState& state, SchedulerResume resume);

private:
  LrScheduleConfig config_;
  std::int64_t num_steps_ = 0;
};

// The resume policy the flags ask for.
SchedulerResume scheduler_resume(const TrainOptions& options);

}  // namespace mgt
