#include "train/tensorboard_log.hpp"

#include <algorithm>
#include <cmath>

namespace mgt {

TensorBoardLog::TensorBoardLog(const LoggingOptions& options, std::int64_t world_size)
    : options_(options),
      world_size_(world_size),
      writer_(options.tensorboard_dir.value(), static_cast<std::size_t>(std::max<std::int64_t>(1, options.tensorboard_queue_size))) {}

void TensorBoardLog::both(const std::string& tag, double value, std::int64_t iteration, std::int64_t samples) {
  writer_.add_scalar(tag, value, iteration);
  writer_.add_scalar(tag + " vs samples", value, samples);
}

void TensorBoardLog::training_iteration(const TrainingScalars& s) {
  if (s.iteration % options_.tensorboard_log_interval != 0) return;
  const std::int64_t n = s.consumed_samples;
  if (options_.log_learning_rate_to_tensorboard) {
    both("learning-rate", s.learning_rate, s.iteration, n);
    if (s.decoupled_learning_rate) writer_.add_scalar("decoupled-learning-rate", *s.decoupled_learning_rate, s.iteration);
  }
  if (s.skipped_samples > 0) writer_.add_scalar("skipped-train-samples", static_cast<double>(s.skipped_samples), s.iteration);
  both("batch-size", static_cast<double>(s.batch_size), s.iteration, n);
  for (const auto& [key, value] : s.losses) both(key, value, s.iteration, n);
  if (options_.log_loss_scale_to_tensorboard) both("loss-scale", s.loss_scale, s.iteration, n);
  if (options_.log_world_size_to_tensorboard) both("world-size", static_cast<double>(world_size_), s.iteration, n);
  if (s.grad_norm) both("grad-norm", *s.grad_norm, s.iteration, n);
  if (s.num_zeros) both("num-zeros", *s.num_zeros, s.iteration, n);
  if (s.params_norm) both("params-norm", *s.params_norm, s.iteration, n);
  for (const auto& [name, value] : s.moe_losses.totals) writer_.add_scalar(name, value, s.iteration);
  if (s.moe_per_layer_logging)
    for (const auto& [name, values] : s.moe_losses.per_layer)
      for (std::size_t i = 0; i < values.size(); ++i)
        writer_.add_scalar("moe/" + name + "_layer_" + std::to_string(i), values[i], s.iteration);
}

void TensorBoardLog::log_interval_end(std::int64_t iteration, double seconds_per_iteration,
                                      std::optional<double> tflops_per_gpu) {
  if (options_.log_timers_to_tensorboard) {
    writer_.add_scalar("iteration-time", seconds_per_iteration, iteration);
    if (tflops_per_gpu) writer_.add_scalar("throughput", *tflops_per_gpu, iteration);
  }
  writer_.flush();
}

void TensorBoardLog::evaluation(std::int64_t iteration, std::int64_t consumed_samples, const LossValues& losses) {
  for (const auto& [key, value] : losses) {
    both(key + " validation", value, iteration, consumed_samples);
    if (options_.log_validation_ppl_to_tensorboard)
      both(key + " validation ppl", std::exp(std::min(20.0, value)), iteration, consumed_samples);
  }
  writer_.flush();
}

}  // namespace mgt
