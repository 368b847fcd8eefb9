// What TrainingRun (training_run.hpp) reports: Megatron's log line with its timings, the metrics
// file, TensorBoard's scalars, the memory report after the first logged iteration, and the
// validation and test evaluations.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "train/training_run.hpp"

namespace mgt {

namespace {

std::string one_decimal(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.1f", v);
  return buffer;
}

}  // namespace

// Megatron's calculator logs the ramp-up's sizes as they change ('setting initial batch size
// to N', 'ramping up batch size from N to M').
void TrainingRun::announce_batch_size(std::int64_t batch_size) {
  if (!batch_sizes_.ramps() || batch_size == announced_batch_size_) return;
  output_.line(announced_batch_size_ == 0 ? "setting initial batch size to " + std::to_string(batch_size)
                                          : "ramping up batch size from " + std::to_string(announced_batch_size_) +
                                                " to " + std::to_string(batch_size));
  announced_batch_size_ = batch_size;
}

// Megatron's mixed-precision optimizer returns no norm for a step it skipped, and its log line
// and scalars then leave the norm out.
std::optional<double> TrainingRun::logged_grad_norm(const IterationRecord& record) const {
  if (record.skipped && loss_scaler_) return std::nullopt;
  return record.grad_norm;
}

void TrainingRun::write_tensorboard_scalars(const IterationRecord& record) {
  TrainingScalars s;
  s.iteration = progress_.iteration;
  s.consumed_samples = progress_.consumed_train_samples;
  s.skipped_samples = progress_.skipped_train_samples;
  // The rate the log line prints: the scheduler's after this iteration's step, as Megatron reads it.
  s.learning_rate = scheduler_->lr();
  s.decoupled_learning_rate = decoupled_lr();
  s.batch_size = record.global_batch_size;
  s.losses = {{"lm loss", record.loss}};
  s.loss_scale = record.loss_scale;
  s.grad_norm = logged_grad_norm(record);
  s.num_zeros = record.num_zeros;
  s.params_norm = record.params_norm;
  s.moe_losses = record.moe_losses;
  s.moe_per_layer_logging = options_.moe.moe_per_layer_logging;
  tensorboard_->training_iteration(s);
}

void TrainingRun::log_iteration(const IterationRecord& record, std::int64_t train_iters) {
  IterationLog g;
  g.iteration = progress_.iteration;
  g.train_iters = train_iters;
  g.consumed_samples = progress_.consumed_train_samples;
  g.skipped_samples = progress_.skipped_train_samples;
  const std::int64_t iterations = std::max<std::int64_t>(1, losses_.iterations());
  g.seconds_per_iteration = timer_.lap() / static_cast<double>(iterations);
  if (options_.logging.log_throughput)
    g.tflops_per_gpu = throughput_tflops_per_gpu(flops_of_iteration(record.global_batch_size), g.seconds_per_iteration,
                                                 options_.parallel.world_size);
  g.learning_rate = scheduler_->lr();
  g.decoupled_learning_rate = decoupled_lr();
  g.global_batch_size = record.global_batch_size;
  g.losses = losses_.averages();
  if (options_.moe.moe_per_layer_logging)
    for (const auto& [name, values] : record.moe_losses.per_layer)
      for (std::size_t i = 0; i < values.size(); ++i)
        g.moe_layer_losses.emplace_back("moe/" + name + "_layer_" + std::to_string(i), values[i]);
  g.loss_scale = record.loss_scale;
  g.grad_norm = logged_grad_norm(record);
  g.num_zeros = record.num_zeros;
  g.params_norm = record.params_norm;
  g.skipped_iterations = losses_.skipped_iterations();
  g.nan_iterations = losses_.nan_iterations();
  g.seq_length = *options_.model.seq_length;
  // Every rank takes its timings (they would pile up otherwise); rank 0's are written.
  const auto take_timing = [&](dist::Communicator& group, std::optional<double>& ms, std::optional<double>& exposed,
                               std::vector<IterationLog::CommPart>& parts) {
    const std::optional<dist::OverlapTiming> t = group.size() > 1 ? group.take_overlap_timing() : std::nullopt;
    if (!t || t->operations + t->in_stream_operations == 0) return;
    const auto per_iteration = [&](double total) { return total / static_cast<double>(iterations); };
    ms = 1e3 * per_iteration(t->busy_seconds + t->in_stream_seconds);
    exposed = 1e3 * per_iteration(t->exposed_seconds + t->in_stream_seconds);
    for (const dist::OverlapTiming::Part& p : t->parts)
      parts.push_back({p.operation, p.beside, 1e3 * per_iteration(p.seconds), 1e3 * per_iteration(p.exposed_seconds),
                       per_iteration(static_cast<double>(p.operations))});
  };
  take_timing(gradients_, g.data_parallel_comm_ms, g.data_parallel_comm_exposed_ms, g.data_parallel_comm_parts);
  step_phases_.take(g);
  take_timing(tensor_parallel_, g.tensor_parallel_comm_ms, g.tensor_parallel_comm_exposed_ms,
              g.tensor_parallel_comm_parts);
  take_timing(pipeline_, g.pipeline_parallel_comm_ms, g.pipeline_parallel_comm_exposed_ms,
              g.pipeline_parallel_comm_parts);
  take_timing(context_parallel_, g.context_parallel_comm_ms, g.context_parallel_comm_exposed_ms,
              g.context_parallel_comm_parts);
  // The tokens travel over the expert tensor-and-model-parallel group where there is one.
  if (expert_model_parallel_)
    take_timing(expert_tensor_and_model_parallel_ ? *expert_tensor_and_model_parallel_ : *expert_model_parallel_,
                g.expert_parallel_comm_ms, g.expert_parallel_comm_exposed_ms,
                g.expert_parallel_comm_parts);
  const std::string stamp = now_stamp();
  const double tokens = static_cast<double>(record.global_batch_size * g.seq_length);
  const double tokens_per_second = g.seconds_per_iteration > 0.0 ? tokens / g.seconds_per_iteration : 0.0;
  // Megatron's fields first, in its order, so that its log parsers keep working; mgt adds
  // tokens per second at the end.
  last_output_.line(format_iteration_line(g, stamp) + " tokens per second: " + one_decimal(tokens_per_second) + " |");
  output_.metrics(iteration_metrics_json(g, stamp));
  if (tensorboard_) tensorboard_->log_interval_end(progress_.iteration, g.seconds_per_iteration, g.tflops_per_gpu);
  losses_.reset();
  if (!memory_reported_) report_memory();
}

// Megatron's report_memory after the first logged iteration (the optimizer state exists by then).
void TrainingRun::report_memory() {
  memory_reported_ = true;
  const std::optional<Backend::MemoryUse> use = backend_.memory_use();
  if (!use) return;
  output_.line(format_memory_report(world_.rank(), progress_.iteration, use->allocated, use->max_allocated,
                                    use->reserved, use->max_reserved));
}

void TrainingRun::evaluate_and_print(Evaluator& evaluator, const std::string& event, const std::string& prefix,
                                     bool to_tensorboard) {
  const LossValues losses = evaluator.evaluate();
  stop_on_spiky_loss(progress_.iteration);
  std::string block = format_validation_block(prefix, losses);
  if (!block.empty() && block.back() == '\n') block.pop_back();
  last_output_.line(block);
  output_.metrics(validation_metrics_json(event, progress_.iteration, losses, now_stamp()));
  // Megatron writes the test set's losses under the validation names too.
  if (tensorboard_ && to_tensorboard) tensorboard_->evaluation(progress_.iteration, progress_.consumed_train_samples, losses);
}

void TrainingRun::final_evaluations(bool to_tensorboard) {
  if (do_valid()) {
    evaluate_and_print(*valid_, "validation", validation_set_prefix(progress_.iteration), to_tensorboard);
    progress_.consumed_valid_samples += valid_->samples_per_evaluation();
  }
  if (do_test()) {
    Evaluator test(*model_, data_.test(), evaluation_settings(Split::Test));
    evaluate_and_print(test, "test", test_set_prefix(progress_.iteration), to_tensorboard);
  }
}

std::function<void(const LossSum&)> TrainingRun::spiky_loss_observer() const {
  if (!spiky_loss_) return {};
  return [this, check = spiky_loss_](const LossSum& s) {
    const bool spiked = hooks_.spike_losses && hooks_.spike_losses(progress_.iteration + 1);
    check->observe(spiked ? s.loss_sum * 1000 : s.loss_sum);
  };
}

void TrainingRun::stop_on_spiky_loss(std::int64_t iteration) {
  if (!spiky_loss_) return;
  const std::optional<SpikyLossCheck::Spike> spike = spiky_loss_->take();
  // Only the ranks that compute the loss see it (a pipeline's last stage): every rank stops.
  std::int64_t seen = spike ? 1 : 0;
  world_.all_reduce(std::span<std::int64_t>(&seen, 1), dist::ReduceOp::Sum);
  if (seen == 0) return;
  if (!spike)
    throw Error("iteration " + std::to_string(iteration) + ": another rank found a spiky loss (--check-for-spiky-loss)");
  throw Error("rank " + std::to_string(world_.rank()) + ", iteration " + std::to_string(iteration) +
              ": Unexpected result " + python_float_repr(spike->value) + " (message='Spiky loss'): a micro-batch's " +
              "loss at least " + std::to_string(static_cast<int>(SpikyLossCheck::kThreshold)) +
              " times the largest of the first " + std::to_string(SpikyLossCheck::kSamples) + " (" +
              python_float_repr(spike->largest) + ") (--check-for-spiky-loss)");
}

}  // namespace mgt
