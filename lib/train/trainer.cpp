#include "train/trainer.hpp"

#include <algorithm>
#include <iostream>

#include "core/error.hpp"
#include "train/rank_agreement.hpp"
#include "train/training_log.hpp"
#include "train/training_run.hpp"
#include "train/weight_hash_check.hpp"

namespace mgt {

namespace {

// Flags mgt-train parses (they are Megatron's and mgt-index takes them) but cannot honour yet.
void refuse_unsupported(const TrainOptions& o) {
  if (o.data.reset_attention_mask)
    throw UsageError("--reset-attention-mask is not supported by mgt-train yet (the model has no per-document "
                     "attention mask); --reset-position-ids and --eod-mask-loss are");
}

}  // namespace

TrainResult TrainingRun::run() {
  refuse_unsupported(options_);
  print_layout();
  // Each step either succeeds on every rank or stops every rank (rank_agreement.hpp). Rank 0
  // alone writes checkpoints, so it alone holds the save directory's lock and checks its
  // contents; it also builds the dataset indices first, which the other ranks then find in the
  // cache instead of building them again.
  run_on_all_ranks_or_none(world_, "locking the save directory", [&] { if (chief_) lock_save_directory(); });
  run_on_all_ranks_or_none(world_, "opening --tensorboard-dir", [&] { if (chief_) open_tensorboard(); });
  run_on_all_ranks_or_none(world_, "building the model", [&] { build_model(); });
  run_on_all_ranks_or_none(world_, "loading the checkpoint", [&] { load_checkpoint(); });
  if (progress_log_) progress_log_->set_job_start_flops(progress_.num_floating_point_operations_so_far);
  if (options_.moe.moe_use_upcycling)
    run_on_all_ranks_or_none(world_, "saving the upcycled checkpoint", [&] { save_upcycled_checkpoint(); });
  run_on_all_ranks_or_none(world_, "checking the save directory",
                           [&] { if (chief_) require_planned_saves_new_in_save_directory(); });
  output_.line(format_datetime_line("after model, optimizer, and learning rate scheduler are built", now_stamp()));
  run_on_all_ranks_or_none(world_, "building the datasets", [&] { if (chief_) build_data(); });
  run_on_all_ranks_or_none(world_, "building the datasets", [&] { if (!chief_) build_data(); });
  output_.line(format_datetime_line("after dataloaders are built", now_stamp()));
  output_.line("done with setup ...");
  TrainResult result;
  if (options_.logging.skip_train) {
    // Megatron's pretrain with --skip-train: the loaded model evaluated on the validation set
    // from its first sample and on the test set, nothing written to TensorBoard, nothing saved.
    output_.line("skipping training (--skip-train is on) ...");
    result.iteration = progress_.iteration;
    final_evaluations(false);
    if (tensorboard_) tensorboard_->flush();
    return result;
  }
  output_.line("training ...");
  output_.line(format_datetime_line("before the start of training step", now_stamp()));

  const std::int64_t first_iteration = progress_.iteration;
  if (options_.logging.check_weight_hash_interval) check_weight_hashes();
  result.exit_reason = train_loop();
  finish_param_gather();
  result.iteration = progress_.iteration;
  if (result.exit_reason == ExitReason::None) {
    output_.line(format_datetime_line("after training is done", now_stamp()));
    if (options_.checkpoint.save && progress_.iteration != first_iteration &&
        progress_.iteration % *options_.checkpoint.save_interval != 0)
      save_checkpoint();
    final_evaluations(true);
  }
  // Megatron's maybe_finalize_async_save(blocking=True) at the end of training.
  finalize_async_save(true);
  result.last_checkpoint = last_checkpoint_;
  if (tensorboard_) tensorboard_->flush();
  return result;
}

ExitReason TrainingRun::train_loop() {
  const std::int64_t train_iters = options_.total_train_iters();
  timer_.start();
  while (progress_.iteration < train_iters) {
    // Megatron's maybe_finalize_async_save(blocking=False) each iteration: a background save
    // every rank has written is published.
    finalize_async_save(false);
    save_when_batch_size_changes();
    const std::vector<std::int64_t>& skips = options_.optim.iterations_to_skip;
    if (std::find(skips.begin(), skips.end(), progress_.iteration) != skips.end()) {
      skip_iteration();
      continue;
    }
    const LoggingOptions& l = options_.logging;
    const bool profiled = l.profile && progress_.iteration >= l.profile_step_start &&
                          progress_.iteration < l.profile_step_end;
    if (profiled) backend_.set_profiling(true);
    const IterationRecord record = train_step();
    if (profiled) backend_.set_profiling(false);
    if (hooks_.after_iteration) {
      finish_param_gather();
      hooks_.after_iteration(record);
    }
    if (tensorboard_) write_tensorboard_scalars(record);
    if (progress_.iteration % options_.logging.log_interval == 0) log_iteration(record, train_iters);
    if (do_valid() && progress_.iteration % options_.logging.eval_interval == 0) {
      timer_.stop();
      evaluate_and_print(*valid_, "validation", validation_prefix(progress_.iteration));
      progress_.consumed_valid_samples += valid_->samples_per_evaluation();
      timer_.start();
    }
    // Megatron's post_training_step_callbacks, after the evaluation.
    const std::optional<std::int64_t>& hash_interval = options_.logging.check_weight_hash_interval;
    if (hash_interval && progress_.iteration % *hash_interval == 0) {
      timer_.stop();
      check_weight_hashes();
      timer_.start();
    }
    const ExitReason reason = checkpoint_and_decide_exit();
    if (reason != ExitReason::None) return reason;
  }
  return ExitReason::None;
}

void TrainingRun::check_weight_hashes() {
  finish_param_gather();
  GptParameters& params = model_->parameters();
  params.refresh_compute_copy();  // what the next forward computes with
  const std::vector<std::string> differing =
      tensors_differing_across_replicas(params, &data_parallel_, expert_data_parallel_);
  // Every rank stops together, those whose tensors agree too.
  std::int64_t count = static_cast<std::int64_t>(differing.size());
  world_.all_reduce(std::span<std::int64_t>(&count, 1), dist::ReduceOp::Sum);
  if (count > 0) {
    std::string names;
    for (std::size_t i = 0; i < std::min<std::size_t>(differing.size(), 3); ++i) names += (i ? ", " : "") + differing[i];
    if (differing.size() > 3) names += " and " + std::to_string(differing.size() - 3) + " more";
    throw Error("Parameter hashes not matching across DP replicas after " + std::to_string(progress_.iteration) +
                " iterations" + (names.empty() ? " (in other ranks' tensors)" : ": " + names));
  }
  output_.line(">>> Weight hashes match after " + std::to_string(progress_.iteration) + " iterations...");
}

TrainResult train_gpt(const TrainOptions& options, const TrainerSettings& settings, const TrainerHooks& hooks) {
  if (settings.max_consecutive_nonfinite_iterations <= 0)
    throw Error("internal error: max_consecutive_nonfinite_iterations must be positive");
  TrainingRun run(options, settings, hooks);
  return run.run();
}

}  // namespace mgt
