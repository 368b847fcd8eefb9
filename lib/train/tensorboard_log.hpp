// What Megatron-LM writes to --tensorboard-dir, under its names (megatron/training/training.py
// training_log and evaluate_and_print_results, core_v0.13): each scalar at step = iteration, and
// again as "<name> vs samples" at step = consumed training samples.
//   every --tensorboard-log-interval iterations: learning-rate (and decoupled-learning-rate with
//     --decoupled-lr, with no "vs samples" twin, as Megatron), batch-size, each loss ("lm loss"),
//     loss-scale (unless --no-log-loss-scale-to-tensorboard), world-size (with
//     --log-world-size-to-tensorboard), grad-norm, num-zeros, params-norm (when known);
//   every --log-interval iterations with --log-timers-to-tensorboard: iteration-time (seconds),
//     and throughput (TFLOP/s per GPU) with --log-throughput; no "vs samples" twins, as Megatron;
//   after each evaluation: "<loss> validation" and, with --log-validation-ppl-to-tensorboard,
//     "<loss> validation ppl" = exp(min(20, loss)). Megatron writes the test set's result under
//     the same names.
#pragma once
#include <cstdint>
#include <optional>

#include "train/moe_loss_log.hpp"
#include "train/tensorboard_writer.hpp"
#include "train/train_options.hpp"
#include "train/training_log.hpp"

namespace mgt {

struct TrainingScalars {
  std::int64_t iteration = 0;
  std::int64_t consumed_samples = 0;  // after this iteration
  std::int64_t skipped_samples = 0;   // of --iterations-to-skip so far; written when positive
  double learning_rate = 0.0;
  std::optional<double> decoupled_learning_rate;  // --decoupled-lr
  std::int64_t batch_size = 0;        // global batch size
  LossValues losses;                  // this iteration's
  double loss_scale = 1.0;
  std::optional<double> grad_norm;
  std::optional<double> num_zeros;
  std::optional<double> params_norm;
  MoeLossValues moe_losses;  // written as Megatron's track_moe_metrics writes them
  bool moe_per_layer_logging = false;
};

class TensorBoardLog {
public:
  // Opens a new events file in --tensorboard-dir (options.tensorboard_dir must be set).
  TensorBoardLog(const LoggingOptions& options, std::int64_t world_size);

  // Writes when the iteration is a multiple of --tensorboard-log-interval.
  void training_iteration(const TrainingScalars& scalars);
  // At a log line: the timers, then everything queued is written.
  void log_interval_end(std::int64_t iteration, double seconds_per_iteration, std::optional<double> tflops_per_gpu);
  void evaluation(std::int64_t iteration, std::int64_t consumed_samples, const LossValues& losses);
  void flush() { writer_.flush(); }

  const std::string& path() const { return writer_.path(); }

private:
  // The scalar at `iteration` and, as "<tag> vs samples", at `samples`.
  void both(const std::string& tag, double value, std::int64_t iteration, std::int64_t samples);

  LoggingOptions options_;
  std::int64_t world_size_;
  TensorBoardWriter writer_;
};

}  // namespace mgt
