// TrainingRun's save and exit policy (training_run.hpp): one writer per --save directory, the
// checkpoints at --save-interval, at ramp-up changes and before an exit, and the exit conditions
// every rank agrees on (Megatron's checkpoint_and_decide_exit).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "ckpt/checkpoint_layout.hpp"
#include "train/training_run.hpp"

namespace mgt {

namespace {

std::string padded_iteration(std::int64_t iteration) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%7lld", static_cast<long long>(iteration));
  return buffer;
}

}  // namespace

// The exit conditions of every run.
ExitConditions::Settings TrainingRun::exit_settings(const LoggingOptions& l) {
  ExitConditions::Settings s;
  s.exit_interval = l.exit_interval;
  s.exit_duration_in_mins = l.exit_duration_in_mins;
  // SIGTERM always ends a run cleanly (Slurm's notice before a time limit or preemption);
  // --exit-signal-handler --exit-signal SIG adds SIG (ExitConditions keeps SIGTERM beside it).
  s.exit_signal_handler = true;
  s.exit_signal = l.exit_signal_handler ? l.exit_signal : std::string("SIGTERM");
  return s;
}

// One writer per --save directory, for the whole run; what interrupted saves left there is
// cleared only once the lock is held.
void TrainingRun::lock_save_directory() {
  if (!options_.checkpoint.save) return;
  save_lock_.emplace(open_save_directory(*options_.checkpoint.save));
  if (options_.logging.log_progress) {
    progress_log_.emplace(*options_.checkpoint.save, settings_.job_id, world_.size(), started_at_);
    progress_log_->job_started();
  }
}

void TrainingRun::log_progress_after_save(std::int64_t iteration, bool background) {
  if (!progress_log_) return;
  const double tokens = static_cast<double>(progress_.consumed_train_samples) *
                        static_cast<double>(*options_.model.seq_length);
  progress_log_->checkpoint_saved(iteration, background, progress_.num_floating_point_operations_so_far, tokens);
}

// The last iteration this run will train: --train-iters, or an earlier --exit-interval.
std::int64_t TrainingRun::last_planned_iteration() const {
  std::int64_t last = options_.total_train_iters();
  const std::optional<std::int64_t>& exit_interval = options_.logging.exit_interval;
  if (exit_interval && *exit_interval > 0)
    last = std::min(last, (progress_.iteration / *exit_interval + 1) * *exit_interval);
  return last;
}

// Before any training: a save this run will make must not meet a committed iteration.
void TrainingRun::require_planned_saves_new_in_save_directory() {
  const CheckpointOptions& c = options_.checkpoint;
  if (!c.save || options_.logging.skip_train) return;  // --skip-train saves nothing
  require_planned_saves_new(*c.save, progress_.iteration, last_planned_iteration(), *c.save_interval);
}

// --moe-use-upcycling: the upcycled model as iteration 1 of --save, weights and random state
// only, as Megatron saves it (save_checkpoint with no optimizer); training then starts at
// iteration 0 from the same weights, with the dense run's consumed samples.
void TrainingRun::save_upcycled_checkpoint() {
  TrainCheckpointSaveSettings s = checkpoint_save_settings();
  s.save_optimizer = false;
  progress_.iteration = 1;
  const SavedTrainCheckpoint saved = save_train_checkpoint(*options_.checkpoint.save, parts(), s, world_,
                                                           checkpoint_layout());
  last_checkpoint_ = saved.directory;
  report_save(progress_.iteration, saved, false);
  output_.line("Upcycled checkpoint saved to " + *options_.checkpoint.save);
  progress_.iteration = 0;
  progress_.num_floating_point_operations_so_far = 0.0;
}

// Megatron's train(): when the ramp-up changes the number of micro-batches, a checkpoint of the
// state before the first iteration of the new size (not at the run's first iteration, and not a
// second time for an iteration just saved).
void TrainingRun::save_when_batch_size_changes() {
  const std::int64_t batch_size = global_batch();
  const bool changed = previous_batch_size_ != 0 && batch_size != previous_batch_size_;
  previous_batch_size_ = batch_size;
  if (changed && options_.checkpoint.save && progress_.iteration != 0 &&
      last_saved_iteration_ != progress_.iteration) {
    save_checkpoint();
  }
}

// Megatron's checkpoint_and_decide_exit.
ExitReason TrainingRun::checkpoint_and_decide_exit() {
  const CheckpointOptions& c = options_.checkpoint;
  const ExitReason reason = agreed_exit_reason();
  if (reason == ExitReason::Signal) {
    if (c.save) save_checkpoint();
    output_.line(format_datetime_line(exit_.exit_message(reason, progress_.iteration), now_stamp()));
    return reason;
  }
  bool saved = false;
  if (c.save && progress_.iteration % *c.save_interval == 0) {
    save_checkpoint();
    saved = true;
  }
  if (reason != ExitReason::None) {
    if (c.save && !saved) save_checkpoint();
    output_.line(format_datetime_line(exit_.exit_message(reason, progress_.iteration), now_stamp()));
  }
  return reason;
}

// Any rank's reason stops every rank (Megatron all-reduces its exit checks): a signal or a time
// limit may reach the ranks at different iterations. The priority is should_exit's.
ExitReason TrainingRun::agreed_exit_reason() {
  const ExitReason local = exit_.should_exit(progress_.iteration);
  if (world_.size() == 1) return local;
  const auto rank_of = [](ExitReason r) -> std::int64_t {
    switch (r) {
      case ExitReason::Signal: return 3;
      case ExitReason::Duration: return 2;
      case ExitReason::Interval: return 1;
      case ExitReason::None: break;
    }
    return 0;
  };
  std::int64_t agreed = rank_of(local);
  world_.all_reduce(std::span<std::int64_t>(&agreed, 1), dist::ReduceOp::Max);
  for (ExitReason r : {ExitReason::Signal, ExitReason::Duration, ExitReason::Interval})
    if (rank_of(r) == agreed) return r;
  return ExitReason::None;
}

// Every rank writes its own part of the checkpoint (train_checkpoint.hpp), in parallel: no
// gather, and no rank holds more than its shard; rank 0 publishes the directory once all have
// written. With --async-save the files are written in the background (async_checkpoint_save.hpp)
// and published by a later finalize_async_save.
void TrainingRun::save_checkpoint() {
  timer_.stop();
  finish_param_gather();
  // Megatron finalizes the save in flight before it starts another (one at a time).
  finalize_async_save(true);
  const std::string& dir = *options_.checkpoint.save;
  output_.line("saving checkpoint at iteration " + padded_iteration(progress_.iteration) + " to " + dir +
               " in hdf5 format");
  const TrainCheckpointSaveSettings s = checkpoint_save_settings();
  const ckpt::WorldLayout layout = checkpoint_layout();
  if (options_.checkpoint.async_save) {
    ckpt::SnapshotWriteOptions write;
    if (const std::int64_t delay = options_.checkpoint.async_save_delay_ms; delay > 0)
      write.before_close = [delay](const std::string&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      };
    async_save_ = start_async_train_checkpoint_save(dir, parts(), s, world_, layout, std::move(write));
    output_.line("  checkpoint of iteration " + padded_iteration(progress_.iteration) +
                 " copied to host memory; its files are written in the background");
    log_progress_after_save(progress_.iteration, true);
  } else {
    const SavedTrainCheckpoint saved = save_train_checkpoint(dir, parts(), s, world_, layout);
    last_checkpoint_ = saved.directory;
    report_save(progress_.iteration, saved, false);
    log_progress_after_save(progress_.iteration, false);
  }
  last_saved_iteration_ = progress_.iteration;
  timer_.start();
}

TrainCheckpointSaveSettings TrainingRun::checkpoint_save_settings() const {
  TrainCheckpointSaveSettings s;
  s.save_optimizer = !options_.checkpoint.no_save_optim;
  s.save_rng = !options_.checkpoint.no_save_rng;
  s.args_json = args_json_;
  s.tokenizer_json = tokenizer_json_;
  s.parallel_layout_json = parallel_layout_json_;
  s.expert_parallel = expert_data_parallel_ != nullptr;
  s.writes_experts = s.expert_parallel && expert_data_parallel_->rank() == 0;
  return s;
}

ckpt::WorldLayout TrainingRun::checkpoint_layout() const {
  ckpt::WorldLayout layout;
  layout.tensor_model_parallel_size = static_cast<int>(tensor_parallel_size());
  layout.pipeline_model_parallel_size = static_cast<int>(pipeline_parallel_size());
  // The checkpoint does not depend on context parallelism: each (tensor, pipeline) rank's weights
  // are written once, by rank 0 of its gradient group, and the distributed optimizer's shards are
  // those of the gradient group (data-parallel × context-parallel), which resume at any size.
  layout.data_parallel_size = static_cast<int>(gradient_group_size());
  layout.tensor_model_parallel_rank = tensor_parallel_.rank();
  layout.pipeline_model_parallel_rank = pipeline_parallel_size() > 1 ? pipeline_.rank() : 0;
  layout.data_parallel_rank = gradients_.rank();
  return layout;
}

void TrainingRun::finalize_async_save(bool blocking) {
  if (!async_save_) return;
  if (blocking && !async_save_->written())
    output_.line("  waiting for the background write of the checkpoint of iteration " +
                 padded_iteration(async_save_->iteration()));
  const std::optional<SavedTrainCheckpoint> saved = async_save_->try_finalize(world_, blocking);
  if (!saved) return;
  const std::int64_t iteration = async_save_->iteration();
  async_save_.reset();
  last_checkpoint_ = saved->directory;
  report_save(iteration, *saved, true);
  if (progress_log_) progress_log_->background_save_finished(iteration);
}

namespace {

std::string fixed(double value, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string gigabytes_per_second(std::uint64_t bytes, double seconds) {
  return seconds > 0 ? fixed(static_cast<double>(bytes) / 1e9 / seconds, 3) : std::string("inf");
}

}  // namespace

// Megatron's line, then what each rank wrote and how fast, and the aggregate: the bytes of every
// rank over the time of the slowest (the ranks write at the same time).
void TrainingRun::report_save(std::int64_t iteration, const SavedTrainCheckpoint& saved, bool background) {
  const std::string& dir = *options_.checkpoint.save;
  output_.line("  successfully saved checkpoint from iteration " + padded_iteration(iteration) + " to " + dir + " " +
               model_parallel_coordinates());
  const std::string n = std::to_string(saved.ranks.size());
  std::uint64_t total = 0;
  double slowest = 0.0;
  for (std::size_t r = 0; r < saved.ranks.size(); ++r) {
    const RankSaveStatistics& s = saved.ranks[r];
    total += s.bytes;
    slowest = std::max(slowest, s.write_seconds);
    output_.line("  checkpoint write [rank " + std::to_string(r) + "/" + n + "]: " + std::to_string(s.bytes) +
                 " bytes in " + fixed(s.write_seconds, 3) + " s, " + gigabytes_per_second(s.bytes, s.write_seconds) +
                 " GB/s (host copy " + fixed(s.copy_seconds, 3) + " s)");
  }
  output_.line("  checkpoint write [all " + n + " ranks]: " + std::to_string(total) + " bytes in " +
               fixed(slowest, 3) + " s, " + gigabytes_per_second(total, slowest) + " GB/s aggregate (iteration " +
               std::to_string(iteration) + (background ? ", in the background)" : ")"));
}

}  // namespace mgt
