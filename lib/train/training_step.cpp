// One training iteration of TrainingRun (training_run.hpp): this rank's micro-batches through the
// model (or the pipeline's schedule), the gradients' reductions, the loss scaler's and the
// optimizer's step, and the stop after too many non-finite iterations.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <span>
#include <string>

#include "ckpt/checkpoint_layout.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "model/context_parallel_split.hpp"
#include "train/params_norm.hpp"
#include "train/training_run.hpp"

namespace mgt {

namespace {

// A loss or norm for a message: "nan", "inf" or the log line's %.6E.
std::string number_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6E", v);
  return buffer;
}

}  // namespace

IterationRecord TrainingRun::train_step() {
  GptParameters& params = model_->parameters();
  params.zero_grads();
  model_->reset_moe_statistics();
  StepPhaseTimer::Marks& marks = step_phases_.begin_step(backend_);
  // [Σ CE · mask, Σ mask] of this rank's micro-batches.
  double sums[2] = {0.0, 0.0};
  const std::int64_t dp = data_parallel_size();
  const std::int64_t cp = context_parallel_size();
  const std::int64_t batch_size = global_batch();
  announce_batch_size(batch_size);
  const std::int64_t n = batch_size / (micro_batch() * dp);
  // This rank's micro-batch m is micro-batch m·dp + rank of the global batch (the sampler's
  // order): its dropout masks are the ones the one-rank run draws for it.
  const auto dropout_of = [&](std::int64_t m) {
    const std::int64_t global_micro = m * dp + data_parallel_.rank();
    return DropoutRng{progress_.dropout_seed, static_cast<std::uint64_t>(progress_.micro_steps + global_micro)};
  };
  // Each micro-batch's loss is scaled by 1 / (n · dp · cp): Megatron's 1 / num_microbatches with
  // the average over the gradient group (DDP's gradient_scaling_factor 1 / (dp · cp), the size
  // of its data-parallel group with context parallelism) folded in, so the sum over ranks is the
  // mean. Under context parallelism each rank's loss is the mean over its part of the sequence
  // (forward_step_calc_loss in megatron/core/pipeline_parallel/schedules.py divides by the
  // rank's own tokens), so the gradient is the mean over the context-parallel ranks of their
  // means: the whole sequence's mean when their loss masks count alike. With --calculate-per-token-loss it is not scaled (DDP's factor is 1
  // then too); the sum over micro-batches and ranks is divided by the tokens below.
  const bool per_token = options_.optim.calculate_per_token_loss;
  const LossReduction reduction = per_token ? LossReduction::kSum : LossReduction::kMicroBatchMean;
  // Megatron's schedules seed the backward with the loss times the scaler's scale
  // (config.grad_scale_func); the gradients are unscaled after their reduction, below.
  const float loss_scale = loss_scaler_ ? loss_scaler_->scale() : 1.0f;
  if (executor_) {
    // Every stage reads the micro-batches; each uses its part (tokens first, labels last).
    const LossSum s = executor_->train(n, [&] { return next_train_batch(); }, dropout_of, n * dp * cp, reduction,
                                       loss_scale, [&] { if (overlap_) overlap_->arm(); });
    sums[0] = s.loss_sum;
    sums[1] = s.token_count;
  } else {
    // The loss's sums stay on the device until the last micro-batch is queued: one read-back
    // per iteration, not one per micro-batch (but under --check-for-spiky-loss, below).
    const std::function<void(const LossSum&)> observe_loss = spiky_loss_observer();
    for (std::int64_t m = 0; m < n; ++m) {
      const HostMicroBatch batch = next_train_batch();
      if (overlap_ && m == n - 1) overlap_->arm();
      // --check-for-spiky-loss reads each micro-batch's sums back (Megatron's check reads each
      // loss too); they are added on the host.
      model_->forward_backward(batch.view(), dropout_of(m), n * dp * cp, reduction, loss_scale, loss_sums_.view(),
                               m > 0 && !observe_loss);
      if (observe_loss) {
        double micro[2];
        backend_.copy_to_host(DeviceSpan<const double>(loss_sums_.view()), std::span<double>(micro));
        observe_loss({micro[0], micro[1]});
        sums[0] += micro[0];
        sums[1] += micro[1];
      }
    }
    if (!observe_loss) backend_.copy_to_host(DeviceSpan<const double>(loss_sums_.view()), std::span<double>(sums));
  }
  progress_.micro_steps += n * dp;
  marks.forward_backward_done = backend_.record_timed_event();
  stop_on_spiky_loss(progress_.iteration + 1);  // before the step, as Megatron's check in the loss
  // Megatron's finalize_model_grads: a tied word embedding's gradient summed over the first
  // and last pipeline stages (nothing to do without a pipeline), the data-parallel reduction,
  // then the gradients of each sequence slice's parameters (norms, row-parallel biases) summed
  // over the tensor-parallel group (nothing to do without sequence parallelism). Both sums are
  // over other ranks' copies of the same elements, so the data-parallel one overlaps the
  // backward; with the distributed optimizer it leaves each rank's own shard summed, and the
  // tensor-parallel ranks of one data-parallel rank own the same elements.
  model_->all_reduce_embedding_grads();

  IterationRecord record;
  record.iteration = progress_.iteration + 1;
  const bool poison = hooks_.poison_gradients && hooks_.poison_gradients(record.iteration);
  if (overlap_) {
    // The buckets the backward finished are in flight; those the finalisation above changed
    // start now. A poisoned element lands after the reduction (its bucket may be in flight):
    // the norm still reaches every rank non-finite.
    overlap_->finish_gradient_reduction();
    optimizer_->reduce_gradients(params.table().expert_begin);  // the experts' region, if any
    if (poison) backend_.fill(params.grads().first(1), std::numeric_limits<float>::quiet_NaN());
  } else {
    if (poison) backend_.fill(params.grads().first(1), std::numeric_limits<float>::quiet_NaN());
    // The whole reduction is the backward's tail: started alone, nothing computes beside it
    // (dist::Communicator::set_alone).
    const dist::StartedAlone alone(gradients_, true);
    optimizer_->reduce_gradients();
  }
  model_->all_reduce_partial_grads();
  // finalize_model_grads' _update_router_expert_bias: the tokens each MoE layer routed to each
  // expert, summed over the data- and context-parallel ranks, move its expert bias, whether or
  // not the optimizer takes the step.
  params.moe_expert_bias().update(&gradients_);
  marks.grads_synced = backend_.record_timed_event();
  // Megatron's loss reporting: [Σ loss, Σ tokens] all-reduced over the data-parallel group (with
  // context parallelism: each rank's sums cover its part of the sequences).
  if (gradient_group_size() > 1) gradients_.all_reduce(std::span<double>(sums), dist::ReduceOp::Sum);
  if (!model_->moe_statistics().empty()) {
    std::vector<double> statistics(static_cast<std::size_t>(model_->moe_statistics().size()));
    backend_.copy_to_host(model_->moe_statistics(), std::span<double>(statistics));
    if (dp > 1) data_parallel_.all_reduce(std::span<double>(statistics), dist::ReduceOp::Sum);
    // Each pipeline stage holds its own layers' (Megatron's reduce_aux_losses_tracker_across_ranks
    // sums over the pipeline group); the tensor-parallel ranks hold the same values.
    if (pipeline_.size() > 1) pipeline_.all_reduce(std::span<double>(statistics), dist::ReduceOp::Sum);
    // Under context parallelism each rank holds its part of the sequences' load-balancing loss,
    // which Megatron sums over the group (save_to_aux_losses_tracker's reduce_group in
    // megatron/core/transformer/moe/router.py), and the z-loss of its tokens, which Megatron
    // logs unreduced (the last rank's); mgt averages the z-losses over the group as over the
    // data-parallel ranks: the whole sequences' mean, the one-rank run's.
    if (cp > 1) {
      for (std::size_t i = 1; i < statistics.size(); i += 2) statistics[i] /= static_cast<double>(cp);
      context_parallel_.all_reduce(std::span<double>(statistics), dist::ReduceOp::Sum);
    }
    record.moe_losses =
        moe_loss_values(model_->parameters().config().moe, statistics, static_cast<double>(n * dp));
  }
  if (per_token) divide_gradients_by_tokens(sums[1]);
  if (loss_scaler_) unscale_gradients();
  record.loss = sums[0] / sums[1];
  record.learning_rate = scheduler_->lr();
  // Every rank takes the step or skips it: a non-finite loss enters the norm that the
  // optimizer reduces over the ranks.
  const bool log_stats = logs_statistics(record.iteration);
  StepRequest request;
  request.lr = record.learning_rate;
  request.decoupled_lr = record.decoupled_learning_rate = decoupled_lr();
  request.weight_decay = scheduler_->weight_decay();
  request.loss_finite = std::isfinite(record.loss);
  request.count_zeros = log_stats && options_.logging.log_num_zeros_in_grad;
  const OptimizerStep step = optimizer_->step(request);
  marks.optimizer_done = backend_.record_timed_event();
  record.grad_norm = step.grad_norm;
  record.num_zeros = step.num_zeros;
  record.skipped = !step.applied;
  if (step.applied) scheduler_->step(batch_size);
  // Megatron's optimizer updates the scaler with found_inf at every step, and the log line
  // shows the scale after that update.
  const bool overflow = record.skipped && loss_scaler_ && std::isfinite(record.loss);
  const bool scale_could_drop = loss_scaler_ && loss_scaler_->dynamic() && !loss_scaler_->at_minimum();
  if (loss_scaler_) {
    loss_scaler_->update(record.skipped);
    record.loss_scale = loss_scaler_->scale();
  }
  if (step.applied && overlap_ && options_.parallel.overlap_param_gather) overlap_->start_param_gather();
  // Megatron's train() takes the norm of the updated parameters.
  if (log_stats && options_.logging.log_params_norm) {
    finish_param_gather();
    record.params_norm = params_l2_norm(model_->parameters(), model_parallel_, expert_tensor_model_pipeline_);
  }

  progress_.iteration = record.iteration;
  record.global_batch_size = batch_size;
  progress_.consumed_train_samples += batch_size;
  progress_.num_floating_point_operations_so_far += flops_of_iteration(batch_size);
  // A skipped iteration's loss is not averaged; a NaN marks it as a NaN iteration. Under loss
  // scaling a skip with a finite loss is an overflow of the scaled gradients, which Megatron
  // counts as skipped only; while the dynamic scale can still drop, it is the scaler's to
  // resolve, not a reason to stop.
  LossValues logged = {{"lm loss", record.skipped && !overflow ? std::numeric_limits<double>::quiet_NaN() : record.loss}};
  for (const auto& entry : record.moe_losses.totals) logged.push_back(entry);
  losses_.add(logged, record.skipped);
  if (overflow && scale_could_drop) return record;
  consecutive_nonfinite_ = record.skipped ? consecutive_nonfinite_ + 1 : 0;
  if (record.skipped) {
    log::warn("iteration " + std::to_string(record.iteration) + ": loss " + number_text(record.loss) +
              ", grad norm " + number_text(record.grad_norm) + " (not finite): update skipped");
    if (consecutive_nonfinite_ >= settings_.max_consecutive_nonfinite_iterations) stop_on_nonfinite();
  }
  return record;
}

void TrainingRun::skip_iteration() {
  const std::int64_t batch_size = global_batch();
  announce_batch_size(batch_size);
  const std::int64_t n = batch_size / (micro_batch() * data_parallel_size());
  for (std::int64_t m = 0; m < n; ++m) next_train_batch();
  // No random numbers are drawn (Megatron's dummy_train_step reads batches only): the dropout
  // masks of the next step are those this one would have drawn.
  progress_.iteration += 1;
  progress_.consumed_train_samples += batch_size;
  progress_.skipped_train_samples += batch_size;
  log::info("iteration " + std::to_string(progress_.iteration) + " skipped (--iterations-to-skip): its " +
            std::to_string(batch_size) + " samples read and dropped");
}

HostMicroBatch TrainingRun::next_train_batch() {
  HostMicroBatch batch = train_batches_->next();
  if (context_parallel_size() == 1) return batch;
  // Megatron's get_batch_on_this_cp_rank.
  ContextParallelBatch part =
      split_for_context_parallel_rank(batch.view(), context_parallel_size(), context_parallel_.rank());
  batch.seq_length = part.seq_length;
  batch.tokens = std::move(part.tokens);
  batch.labels = std::move(part.labels);
  batch.position_ids = std::move(part.position_ids);
  batch.loss_mask = std::move(part.loss_mask);
  return batch;
}

// Megatron's _unscale_main_grads_and_check_for_nan: the reduced gradients (this rank's shard
// of them with the distributed optimizer) times 1 / scale, in fp32; a gradient that overflowed
// stays Inf or NaN and the optimizer's norm skips the step.
void TrainingRun::unscale_gradients() {
  for (const BufferShard& shard : optimizer_->shards())
    backend_.scale(model_->parameters().grads().subspan(shard.begin, shard.size()), loss_scaler_->inverse_scale());
}

// Megatron's finalize_model_grads under --calculate-per-token-loss: the reduced gradients scaled
// by 1 / (the global batch's loss-mask sum, over the pipeline's last stage and the data-
// parallel ranks), in fp32 as its scale_gradients does; nothing when there are no tokens.
void TrainingRun::divide_gradients_by_tokens(double tokens) {
  if (!(tokens > 0.0)) return;
  for (const BufferShard& shard : optimizer_->shards())
    backend_.scale(model_->parameters().grads().subspan(shard.begin, shard.size()), static_cast<float>(1.0 / tokens));
}

// The scheduler's rate for Megatron's is_decoupled_lr group: its own max and min, the same
// schedule (megatron/core/optimizer_param_scheduler.py get_lr of a group with max_lr/min_lr).
std::optional<double> TrainingRun::decoupled_lr() const {
  const OptimizationOptions& o = options_.optim;
  if (!o.decoupled_lr) return std::nullopt;
  return scheduler_->lr(*o.decoupled_lr, o.decoupled_min_lr.value_or(o.min_lr));
}

// Whether the iteration's log line or TensorBoard scalars show the --log-num-zeros-in-grad and
// --log-params-norm statistics: Megatron computes them every iteration, but only these
// iterations show them, and counting zeros reads the gradients back to the host. Every rank
// decides alike (the statistics are collective).
bool TrainingRun::logs_statistics(std::int64_t iteration) const {
  const LoggingOptions& l = options_.logging;
  return iteration % l.log_interval == 0 || (l.tensorboard_dir && iteration % l.tensorboard_log_interval == 0);
}

void TrainingRun::stop_on_nonfinite() {
  std::string checkpoint = "no checkpoint was saved";
  if (last_checkpoint_) {
    checkpoint = "the last checkpoint (" + *last_checkpoint_ + ") is intact";
  } else if (options_.checkpoint.save) {
    if (auto latest = ckpt::latest_iteration(*options_.checkpoint.save))
      checkpoint = "the last checkpoint (iteration " + std::to_string(*latest) + " in " +
                   *options_.checkpoint.save + ") is intact";
  }
  throw Error("training stopped at iteration " + std::to_string(progress_.iteration) + ": " +
              std::to_string(consecutive_nonfinite_) +
              " consecutive iterations had a non-finite (NaN or Inf) loss or gradient and were skipped; " +
              checkpoint + ". Lower --lr, check the data, or resume from the checkpoint");
}

}  // namespace mgt
