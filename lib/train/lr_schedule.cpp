#include "train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/log.hpp"
#include "train/train_options.hpp"

namespace mgt {

LrScheduleConfig lr_schedule_config(const TrainOptions& options) {
  const OptimizationOptions& o = options.optim;
  if (!o.lr || !o.global_batch_size || !o.start_weight_decay || !o.end_weight_decay ||
      (!o.train_iters && !o.train_samples))
    throw Error("lr_schedule_config: the options have not been validated");
  LrScheduleConfig c;
  c.init_lr = o.lr_warmup_init;
  c.max_lr = *o.lr;
  c.min_lr = o.min_lr;
  c.lr_decay_style = o.lr_decay_style;
  c.start_wd = *o.start_weight_decay;
  c.end_wd = *o.end_weight_decay;
  c.wd_incr_style = o.weight_decay_incr_style;
  c.lr_wsd_decay_style = o.lr_wsd_decay_style;
  const std::int64_t gbs = *o.global_batch_size;
  if (o.train_iters) {
    c.lr_decay_steps = o.lr_decay_iters.value_or(*o.train_iters) * gbs;
    c.wd_incr_steps = *o.train_iters * gbs;
    if (o.lr_wsd_decay_iters) c.wsd_decay_steps = *o.lr_wsd_decay_iters * gbs;
    c.lr_warmup_steps = o.lr_warmup_fraction
                            ? *o.lr_warmup_fraction * static_cast<double>(c.lr_decay_steps)
                            : static_cast<double>(o.lr_warmup_iters * gbs);
  } else {
    c.lr_decay_steps = o.lr_decay_samples.value_or(*o.train_samples);
    c.wd_incr_steps = *o.train_samples;
    c.wsd_decay_steps = o.lr_wsd_decay_samples;
    c.lr_warmup_steps = o.lr_warmup_fraction
                            ? *o.lr_warmup_fraction * static_cast<double>(c.lr_decay_steps)
                            : static_cast<double>(o.lr_warmup_samples);
  }
  return c;
}

SchedulerResume scheduler_resume(const TrainOptions& options) {
  if (options.optim.override_opt_param_scheduler) return SchedulerResume::Override;
  if (options.optim.use_checkpoint_opt_param_scheduler) return SchedulerResume::UseCheckpoint;
  return SchedulerResume::RequireMatch;
}

OptimizerParamScheduler::OptimizerParamScheduler(const LrScheduleConfig& config) : config_(config) {
  const auto& c = config_;
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw Error("learning-rate schedule: " + what);
  };
  require(c.min_lr >= 0.0, "the minimum learning rate must not be negative");
  require(c.max_lr >= c.min_lr, "the learning rate must not be below the minimum learning rate");
  require(c.init_lr <= c.max_lr, "the warm-up initial learning rate must not exceed the learning rate");
  require(c.lr_decay_steps > 0, "the decay must last at least one sample");
  require(c.lr_warmup_steps < static_cast<double>(c.lr_decay_steps), "the warm-up must be shorter than the decay");
  const auto& s = c.lr_decay_style;
  require(s == "constant" || s == "linear" || s == "cosine" || s == "inverse-square-root" || s == "WSD",
          "unknown decay style '" + s + "'");
  if (s == "WSD") {
    require(c.wsd_decay_steps.has_value(), "WSD needs its decay steps");
    const auto& w = c.lr_wsd_decay_style;
    require(w == "exponential" || w == "linear" || w == "cosine" || w == "minus_sqrt",
            "unknown WSD decay style '" + w + "'");
    require(*c.wsd_decay_steps > 0, "the WSD decay must last at least one sample");
  }
  require(c.start_wd >= 0.0, "the weight decay must not be negative");
  require(c.end_wd >= c.start_wd, "the final weight decay must not be below the initial one");
  const auto& wd = c.wd_incr_style;
  require(wd == "constant" || wd == "linear" || wd == "cosine", "unknown weight-decay increment style '" + wd + "'");
  require(wd != "constant" || c.start_wd == c.end_wd, "constant weight decay needs equal start and end values");
  require(wd == "constant" || c.wd_incr_steps > 0, "the weight-decay increment must last at least one sample");
  log::info("> learning rate decay style: " + c.lr_decay_style);
}

void OptimizerParamScheduler::step(std::int64_t increment) { num_steps_ += increment; }

// Each expression keeps Python's operation order so that rounding matches.
double OptimizerParamScheduler::lr(double max_lr, double min_lr) const {
  const auto& c = config_;
  const double steps = static_cast<double>(num_steps_);
  if (c.lr_warmup_steps > 0 && steps <= c.lr_warmup_steps)
    return c.init_lr + (max_lr - c.init_lr) * steps / c.lr_warmup_steps;
  if (c.lr_decay_style == "constant") return max_lr;
  if (num_steps_ > c.lr_decay_steps) return min_lr;
  if (c.lr_decay_style == "inverse-square-root") {
    const double warmup = std::max(c.lr_warmup_steps, 1.0);
    const double n = static_cast<double>(std::max<std::int64_t>(num_steps_, 1));
    return std::max(min_lr, max_lr * std::pow(warmup, 0.5) / std::pow(n, 0.5));
  }
  const double decay_ratio = (steps - c.lr_warmup_steps) / (static_cast<double>(c.lr_decay_steps) - c.lr_warmup_steps);
  const double delta_lr = max_lr - min_lr;
  double coeff = 0.0;
  if (c.lr_decay_style == "linear") {
    coeff = 1.0 - decay_ratio;
  } else if (c.lr_decay_style == "cosine") {
    coeff = 0.5 * (std::cos(std::numbers::pi * decay_ratio) + 1.0);
  } else {  // WSD
    const std::int64_t anneal_start = c.lr_decay_steps - *c.wsd_decay_steps;
    if (num_steps_ <= anneal_start) {
      coeff = 1.0;
    } else {
      const double r = static_cast<double>(num_steps_ - anneal_start) / static_cast<double>(*c.wsd_decay_steps);
      const auto& w = c.lr_wsd_decay_style;
      if (w == "linear") coeff = 1.0 - r;
      else if (w == "cosine") coeff = 0.5 * (std::cos(std::numbers::pi * r) + 1.0);
      else if (w == "exponential") coeff = (2.0 * std::pow(0.5, r)) - 1.0;
      else coeff = 1.0 - std::sqrt(r);  // minus_sqrt
    }
  }
  return min_lr + coeff * delta_lr;
}

double OptimizerParamScheduler::weight_decay(double start_wd, double end_wd) const {
  const auto& c = config_;
  if (num_steps_ > c.wd_incr_steps) return end_wd;
  if (c.wd_incr_style == "constant") return end_wd;
  const double ratio = static_cast<double>(num_steps_) / static_cast<double>(c.wd_incr_steps);
  const double delta_wd = end_wd - start_wd;
  const double coeff = c.wd_incr_style == "linear" ? ratio : 0.5 * (std::cos(std::numbers::pi * (1 - ratio)) + 1.0);
  return start_wd + coeff * delta_wd;
}

LrSchedulerState OptimizerParamScheduler::state() const {
  const auto& c = config_;
  return {c.max_lr,  c.lr_warmup_steps, num_steps_, c.lr_decay_style, c.lr_decay_steps,
          c.min_lr,  c.start_wd,        c.end_wd,   c.wd_incr_style,  c.wd_incr_steps};
}

namespace {

std::string show(double v) { return python_float_repr(v); }
std::string show(std::int64_t v) { return std::to_string(v); }
std::string show(const std::string& v) { return v; }

// Megatron's _check_and_set.
template <typename T>
T check_and_set(const T& flag_value, const T& checkpoint_value, const std::string& name, SchedulerResume resume) {
  if (resume == SchedulerResume::Override) {
    log::info(" > overriding " + name + " value to " + show(flag_value));
    return flag_value;
  }
  if (resume == SchedulerResume::RequireMatch && !(flag_value == checkpoint_value))
    throw UsageError("learning-rate schedule: the flags give " + show(flag_value) + " but the checkpoint has " +
                     show(checkpoint_value) + " for " + name +
                     " (pass --use-checkpoint-opt_param-scheduler or --override-opt_param-scheduler)");
  log::info(" > using checkpoint value " + show(checkpoint_value) + " for " + name);
  return checkpoint_value;
}

}  // namespace

void OptimizerParamScheduler::load_state(const LrSchedulerState& s, SchedulerResume resume) {
  auto& c = config_;
  c.max_lr = check_and_set(c.max_lr, s.max_lr, "learning rate", resume);
  c.min_lr = check_and_set(c.min_lr, s.min_lr, "minimum learning rate", resume);
  c.lr_warmup_steps = check_and_set(c.lr_warmup_steps, s.lr_warmup_steps, "warmup iterations", resume);
  c.lr_decay_steps = check_and_set(c.lr_decay_steps, s.lr_decay_steps, "total number of iterations", resume);
  c.lr_decay_style = check_and_set(c.lr_decay_style, s.lr_decay_style, "learning rate decay style", resume);
  step(s.num_steps);
  c.start_wd = check_and_set(c.start_wd, s.start_wd, "start weight decay", resume);
  c.end_wd = check_and_set(c.end_wd, s.end_wd, "end weight decay", resume);
  c.wd_incr_steps = check_and_set(c.wd_incr_steps, s.wd_incr_steps, "total number of weight decay iterations", resume);
  c.wd_incr_style = check_and_set(c.wd_incr_style, s.wd_incr_style, "weight decay incr style", resume);
}

}  // namespace mgt
