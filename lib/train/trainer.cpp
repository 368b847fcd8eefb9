#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <utility>

#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/tokenizer_description.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "data/dataset_split.hpp"
#include "dist/local_communicator.hpp"
#include "dist/parallel_layout.hpp"
#include "dist/rank_processes.hpp"
#include "kernels/backend_factory.hpp"
#include "model/gpt_model.hpp"
#include "model/parameter_table.hpp"
#include "train/adamw_optimizer.hpp"
#include "train/batch_prefetcher.hpp"
#include "train/evaluation.hpp"
#include "train/gpt_config_from_options.hpp"
#include "train/loss_scaler.hpp"
#include "train/lr_schedule.hpp"
#include "train/overlapped_data_parallel.hpp"
#include "train/rank_backend_options.hpp"
#include "train/params_norm.hpp"
#include "train/pipeline_executor.hpp"
#include "train/rank_agreement.hpp"
#include "train/run_description.hpp"
#include "train/run_output.hpp"
#include "train/tensorboard_log.hpp"
#include "train/train_checkpoint.hpp"
#include "train/train_data.hpp"
#include "train/train_memory.hpp"
#include "train/training_log.hpp"

namespace mgt {

namespace {

std::string now_stamp() { return log_timestamp(std::chrono::system_clock::now()); }

std::string padded_iteration(std::int64_t iteration) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%7lld", static_cast<long long>(iteration));
  return buffer;
}

std::string one_decimal(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.1f", v);
  return buffer;
}

// Megatron's interval timer: time between log lines, with evaluation and checkpointing left out.
class IntervalTimer {
public:
  using Clock = std::chrono::steady_clock;
  void start() {
    if (!running_) started_ = Clock::now();
    running_ = true;
  }
  void stop() {
    if (running_) elapsed_ += std::chrono::duration<double>(Clock::now() - started_).count();
    running_ = false;
  }
  // Seconds so far, and starts over.
  double lap() {
    const bool was_running = running_;
    stop();
    const double seconds = elapsed_;
    elapsed_ = 0.0;
    if (was_running) start();
    return seconds;
  }

private:
  Clock::time_point started_{};
  double elapsed_ = 0.0;
  bool running_ = false;
};

// Flags mgt-train parses (they are Megatron's and mgt-index takes them) but cannot honour yet.
void refuse_unsupported(const TrainOptions& o) {
  if (o.data.reset_attention_mask)
    throw UsageError("--reset-attention-mask is not supported by mgt-train yet (the model has no per-document "
                     "attention mask); --reset-position-ids and --eod-mask-loss are");
}

ExitConditions::Settings exit_settings(const LoggingOptions& l) {
  ExitConditions::Settings s;
  s.exit_interval = l.exit_interval;
  s.exit_duration_in_mins = l.exit_duration_in_mins;
  // SIGTERM always ends a run cleanly (Slurm's notice before a time limit or preemption);
  // --exit-signal-handler --exit-signal SIG adds SIG (ExitConditions keeps SIGTERM beside it).
  s.exit_signal_handler = true;
  s.exit_signal = l.exit_signal_handler ? l.exit_signal : std::string("SIGTERM");
  return s;
}

class TrainingRun {
public:
  TrainingRun(const TrainOptions& options, const TrainerSettings& settings, const TrainerHooks& hooks)
      : options_(options),
        settings_(settings),
        hooks_(hooks),
        exit_(exit_settings(options.logging)),
        world_(settings.ranks.world ? *settings.ranks.world : own_world_),
        data_parallel_(settings.ranks.data_parallel ? *settings.ranks.data_parallel : own_data_parallel_),
        tensor_parallel_(settings.ranks.tensor_model_parallel ? *settings.ranks.tensor_model_parallel
                                                              : own_tensor_parallel_),
        pipeline_(settings.ranks.pipeline_model_parallel ? *settings.ranks.pipeline_model_parallel : own_pipeline_),
        model_parallel_(settings.ranks.model_parallel ? settings.ranks.model_parallel : &tensor_parallel_),
        chief_(world_.rank() == 0),
        output_(chief_ ? (settings.out ? *settings.out : std::cout) : discarded_,
                chief_ ? options.logging.metrics_file : std::nullopt),
        last_output_(world_.rank() == world_.size() - 1 ? (settings.out ? *settings.out : std::cout) : discarded_,
                     std::nullopt),
        backend_owner_(settings.backend ? nullptr : make_backend(options.device, rank_backend_options(options.logging, world_.rank()))),
        backend_(settings.backend ? *settings.backend : *backend_owner_) {
    if (world_.size() != options.parallel.world_size || data_parallel_.size() != options.parallel.data_parallel_size)
      throw Error("internal error: a run validated for a world of " + std::to_string(options.parallel.world_size) +
                  " (data-parallel size " + std::to_string(options.parallel.data_parallel_size) +
                  ") given a world of " + std::to_string(world_.size()) + " and a data-parallel group of " +
                  std::to_string(data_parallel_.size()));
    if (tensor_parallel_.size() != options.parallel.tensor_model_parallel_size)
      throw Error("internal error: a run validated for tensor-parallel size " +
                  std::to_string(options.parallel.tensor_model_parallel_size) + " given a group of " +
                  std::to_string(tensor_parallel_.size()));
    if (pipeline_.size() != options.parallel.pipeline_model_parallel_size)
      throw Error("internal error: a run validated for pipeline-parallel size " +
                  std::to_string(options.parallel.pipeline_model_parallel_size) + " given a group of " +
                  std::to_string(pipeline_.size()));
  }

  TrainResult run() {
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
    run_on_all_ranks_or_none(world_, "checking the save directory",
                             [&] { if (chief_) require_planned_saves_new_in_save_directory(); });
    output_.line(format_datetime_line("after model, optimizer, and learning rate scheduler are built", now_stamp()));
    run_on_all_ranks_or_none(world_, "building the datasets", [&] { if (chief_) build_data(); });
    run_on_all_ranks_or_none(world_, "building the datasets", [&] { if (!chief_) build_data(); });
    output_.line(format_datetime_line("after dataloaders are built", now_stamp()));
    output_.line("done with setup ...");
    output_.line("training ...");
    output_.line(format_datetime_line("before the start of training step", now_stamp()));

    const std::int64_t first_iteration = progress_.iteration;
    TrainResult result;
    result.exit_reason = train_loop();
    finish_param_gather();
    result.iteration = progress_.iteration;
    if (result.exit_reason == ExitReason::None) {
      output_.line(format_datetime_line("after training is done", now_stamp()));
      if (options_.checkpoint.save && progress_.iteration != first_iteration &&
          progress_.iteration % *options_.checkpoint.save_interval != 0)
        save_checkpoint();
      final_evaluations();
    }
    result.last_checkpoint = last_checkpoint_;
    if (tensorboard_) tensorboard_->flush();
    return result;
  }

private:
  // The global batch size of the next iteration: --global-batch-size, or the ramp-up's size
  // after the samples consumed so far (Megatron's update_num_microbatches at each iteration).
  std::int64_t global_batch() const { return batch_sizes_.global_batch_size(progress_.consumed_train_samples); }
  std::int64_t micro_batch() const { return *options_.optim.micro_batch_size; }
  // Per rank, at the final global batch size: global batch / (micro batch × data-parallel size).
  std::int64_t microbatches() const { return options_.num_microbatches(); }
  // Megatron's FLOP count of an iteration of `global_batch_size` samples.
  double flops_of_iteration(std::int64_t global_batch_size) const {
    GptFlopsShape shape = flops_shape_;
    shape.global_batch_size = global_batch_size;
    return gpt_flops_per_iteration(shape);
  }
  std::int64_t data_parallel_size() const { return data_parallel_.size(); }
  std::int64_t tensor_parallel_size() const { return tensor_parallel_.size(); }
  std::int64_t pipeline_parallel_size() const { return pipeline_.size(); }
  // Megatron's "[ t 1/2, p 1/1 ]": the tensor- and pipeline-parallel coordinates of the printing
  // rank (world rank 0).
  std::string model_parallel_coordinates() const {
    return "[ t 1/" + std::to_string(tensor_parallel_size()) + ", p 1/" + std::to_string(pipeline_parallel_size()) +
           " ]";
  }

  // Megatron's first line (arguments.py validate_args), and the groups of a distributed run.
  void print_layout() {
    const ParallelOptions& p = options_.parallel;
    output_.line("using world size: " + std::to_string(p.world_size) + ", data-parallel size: " +
                 std::to_string(p.data_parallel_size) + ", context-parallel size: " +
                 std::to_string(p.context_parallel_size) + ", tensor-model-parallel size: " +
                 std::to_string(p.tensor_model_parallel_size) + ", pipeline-model-parallel size: " +
                 std::to_string(p.pipeline_model_parallel_size));
    if (world_.size() == 1) return;
    // Megatron's initialize.py _initialize_distributed, then mgt's list of the groups.
    output_.line("> initialized tensor model parallel with size " + std::to_string(p.tensor_model_parallel_size));
    output_.line("> initialized pipeline model parallel with size " + std::to_string(p.pipeline_model_parallel_size));
    const dist::ParallelLayout layout(dist::ParallelFlags{p.tensor_model_parallel_size, p.pipeline_model_parallel_size,
                                                          p.distributed_timeout_minutes},
                                      world_.size());
    const auto groups_of = [&](dist::GroupKind kind) {
      std::string groups;
      for (const std::vector<int>& g : layout.groups(kind)) groups += (groups.empty() ? "" : " ") + dist::format_ranks(g);
      return groups;
    };
    if (p.tensor_model_parallel_size > 1)
      output_.line("> tensor-model-parallel groups: " + groups_of(dist::GroupKind::TensorModelParallel) + " (" +
                   tensor_parallel_.transport() + ")" + (p.sequence_parallel ? ", sequence parallel" : ""));
    if (p.pipeline_model_parallel_size > 1) {
      std::string split;
      for (const PipelineStage& s : pipeline_stages(*options_.model.num_layers, pipeline_split(p)))
        split += (split.empty() ? "" : ", ") + std::to_string(s.num_layers);
      output_.line("> pipeline-model-parallel groups: " + groups_of(dist::GroupKind::PipelineModelParallel) + " (" +
                   pipeline_.transport() + "), layers per stage " + split + ", 1F1B schedule");
    }
    output_.line("> data-parallel groups: " + groups_of(dist::GroupKind::DataParallel) + " (" +
                 data_parallel_.transport() + ")");
    // Collective: every rank runs print_layout.
    output_.line(dist::rank_processes_line(dist::gather_rank_processes(world_)));
  }

  // Megatron's writer lives on the rank that prints; here that is world rank 0.
  void open_tensorboard() {
    if (!options_.logging.tensorboard_dir) return;
    output_.line("> setting tensorboard ...");
    tensorboard_.emplace(options_.logging, world_.size());
  }

  void build_model() {
    output_.line(format_building_tokenizer_line(options_.data.tokenizer.type));
    tokenizer_ = make_tokenizer(options_.data.tokenizer);
    padded_vocab_ = padded_vocab_size(tokenizer_->vocab_size(), options_.model.make_vocab_size_divisible_by,
                                      options_.parallel.tensor_model_parallel_size);
    output_.line(format_padded_vocab_line(tokenizer_->vocab_size(), padded_vocab_));
    keep_checkpoint_padded_vocab();
    apply_precision();
    backend_.set_deterministic(options_.optim.deterministic_mode);
    output_.line("> compute device: " + backend_.description());
    if (options_.logging.profile) {
      // Counted only in train_loop's window: not the model's set-up nor the first iterations.
      backend_.set_profiling(false);
      const std::int64_t first = options_.logging.profile_step_start + 1, last = options_.logging.profile_step_end;
      output_.line(std::string("> --profile: ") + (backend_.device_queue() ? "GPU" : "host") + " time per operation of " +
                   (first == last ? "iteration " + std::to_string(first)
                                  : "iterations " + std::to_string(first) + " to " + std::to_string(last)) +
                   ", printed by the profiled ranks at the end");
    }

    const GptConfig config = gpt_config_from_options(options_, padded_vocab_);
    // Before any allocation: a model that cannot fit is refused with the numbers.
    check_train_memory(options_, config, memory_available_to(backend_));
    output_.line("building GPT model ...");
    TensorParallelism tp;
    if (tensor_parallel_size() > 1) tp = {&tensor_parallel_, options_.parallel.sequence_parallel};
    const std::vector<PipelineStage> stages =
        pipeline_stages(*options_.model.num_layers, pipeline_split(options_.parallel));
    PipelineParallelism pp;
    if (pipeline_parallel_size() > 1) pp = {stages.at(static_cast<std::size_t>(pipeline_.rank())), settings_.ranks.embedding};
    model_ = std::make_unique<GptModel>(config, backend_, static_cast<std::uint64_t>(options_.optim.seed), tp, pp);
    if (pipeline_parallel_size() > 1) executor_ = std::make_unique<PipelineExecutor>(*model_, pipeline_);
    // Megatron prints each model-parallel rank's count from that rank (a tied embedding's copy on
    // the last stage included); rank 0 knows them all (the tables need no memory).
    for (const PipelineStage& stage : stages) {
      for (std::int64_t r = 0; r < tensor_parallel_size(); ++r) {
        std::int64_t count = 0;
        for (const ParameterEntry& e : gpt_parameter_table(config, {tensor_parallel_size(), r}, stage).entries)
          count += e.numel();
        output_.line(" > number of parameters on (tensor, pipeline) model parallel rank (" + std::to_string(r) +
                     ", " + std::to_string(stage.rank) + "): " + std::to_string(count));
      }
    }
    const OptimizationOptions& o = options_.optim;
    optimizer_ = std::make_unique<AdamWOptimizer>(model_->parameters(),
                                                  AdamWSettings{o.adam_beta1, o.adam_beta2, o.adam_eps, o.clip_grad},
                                                  data_parallel_, options_.parallel.use_distributed_optimizer,
                                                  model_parallel_);
    if (optimizer_->distributed() && data_parallel_size() > 1) {
      const BufferShard shard = optimizer_->shard();
      output_.line("> distributed optimizer: each data-parallel rank keeps Adam's state for its shard of the " +
                   std::to_string(model_->parameters().params().size()) + " buffer elements (rank 0: [" +
                   std::to_string(shard.begin) + ", " + std::to_string(shard.end) + "))");
    }
    register_data_parallel_buffers();
    build_overlap();
    scheduler_ = std::make_unique<OptimizerParamScheduler>(lr_schedule_config(options_));
    if (const auto s = loss_scaler_settings(o, options_.parallel.use_distributed_optimizer)) loss_scaler_.emplace(*s);
    flops_shape_ = gpt_flops_shape(options_, padded_vocab_);
    progress_.dropout_seed = static_cast<std::uint64_t>(options_.optim.seed);
    args_json_ = train_args_json(options_, padded_vocab_);
    tokenizer_json_ = tokenizer_description_json(options_.data.tokenizer, *tokenizer_, padded_vocab_);
    parallel_layout_json_ = parallel_layout_json();
  }

  // The buffers the data-parallel collectives work on: where the transport can, it moves them
  // with the copy engines (dist/nccl_peer_copy.hpp), the GEMMs beside keeping every multiprocessor.
  void register_data_parallel_buffers() {
    if (data_parallel_size() == 1) return;
    GptParameters& p = model_->parameters();
    bool registered = data_parallel_.register_buffer(dist::backend_buffer(p.grads()));
    if (optimizer_->distributed()) {
      registered = data_parallel_.register_buffer(dist::backend_buffer(p.params())) && registered;
      if (!p.compute_copy().empty())
        registered = data_parallel_.register_buffer(dist::backend_buffer(p.compute_copy())) && registered;
    }
    if (registered)
      output_.line(std::string("> data-parallel gradients") + (optimizer_->distributed() ? " and weights" : "") +
                   " move between the GPUs with their copy engines (--dp-collectives nccl: NCCL's kernels)");
  }

  // --overlap-grad-reduce (and --overlap-param-gather): the gradient buffer's buckets, reduced as
  // the last backward finishes them. Megatron's bucket size, except on pipeline stages after the
  // first, whose reduction is off the critical path (one bucket there, as Megatron does).
  void build_overlap() {
    const ParallelOptions& p = options_.parallel;
    if (!p.overlap_grad_reduce || data_parallel_size() == 1) return;
    std::optional<std::int64_t> bucket_size = p.ddp_bucket_size.value_or(default_ddp_bucket_size(data_parallel_size()));
    if (pipeline_parallel_size() > 1 && pipeline_.rank() > 0) bucket_size.reset();
    std::vector<GradientBucket> buckets = gradient_buckets(
        model_->parameters(), bucket_size, [&](const ParameterEntry& e) { return model_->gradient_finalized_later(e); });
    overlap_ = std::make_unique<OverlappedDataParallel>(model_->parameters(), std::move(buckets), data_parallel_,
                                                        p.use_distributed_optimizer);
    model_->set_parameter_hooks(overlap_.get());
    if (p.overlap_param_gather) optimizer_->set_param_gather_deferred(true);
    output_.line("> overlapping the data-parallel " +
                 std::string(p.use_distributed_optimizer ? "reduce-scatter" : "all-reduce") +
                 " of the gradients with the backward" + (p.overlap_param_gather ? " and the weights' all-gather with the forward" : "") +
                 ": " + std::to_string(overlap_->buckets().size()) + " bucket(s) on rank 0 (--ddp-bucket-size " +
                 (bucket_size ? std::to_string(*bucket_size) : std::string("unbounded")) + ")");
  }

  // Megatron's level-1 timers, from the queue events of the steps since the last log line (the
  // device's time between them, no synchronisation added): per iteration, the micro-batches'
  // forwards and backwards, the gradients' finalisation and data-parallel reduction (what the
  // step waited for of it), and the optimizer.
  void take_step_phases(IterationLog& g) {
    fold_step_marks();
    const StepPhases sums = std::exchange(phases_, StepPhases{});
    if (sums.steps == 0) return;
    const double per = 1e3 / static_cast<double>(sums.steps);
    g.forward_backward_ms = sums.forward_backward * per;
    g.grads_sync_ms = sums.grads_sync * per;
    g.optimizer_ms = sums.optimizer * per;
  }

  // The marks' times into phases_ (each step's events have passed by the time the step returns,
  // which reads the gradient norm back): the marks of a long log interval do not pile up.
  void fold_step_marks() {
    for (StepMarks& m : step_marks_) {
      if (!m.optimizer_done) continue;  // a step that did not get that far
      phases_.forward_backward += m.forward_backward_done->seconds_since(*m.start);
      phases_.grads_sync += m.grads_synced->seconds_since(*m.forward_backward_done);
      phases_.optimizer += m.optimizer_done->seconds_since(*m.grads_synced);
      ++phases_.steps;
    }
    step_marks_.clear();
  }

  // Where the weights are read outside a forward: the all-gathers still in flight complete first.
  void finish_param_gather() {
    if (overlap_) overlap_->finish_param_gather();
  }

  // The padded vocabulary of the checkpoint to resume, when it differs from this run's: kept, as
  // Megatron keeps a --padded-vocab-size read from a checkpoint, so that a checkpoint padded for
  // another tensor-parallel size reshards on load (the padding rows' logits take part in the
  // softmax: re-padding would change the model).
  void keep_checkpoint_padded_vocab() {
    if (!options_.checkpoint.load) return;
    const std::optional<std::int64_t> stored = checkpoint_padded_vocab_size(*options_.checkpoint.load);
    if (!stored || *stored == padded_vocab_ || *stored < tokenizer_->vocab_size()) return;
    if (*stored % tensor_parallel_size() != 0)
      throw UsageError("the checkpoint in --load " + *options_.checkpoint.load + " has a padded vocabulary of " +
                       std::to_string(*stored) + " rows, which --tensor-model-parallel-size " +
                       std::to_string(tensor_parallel_size()) +
                       " does not divide; re-pad it with mgt-ckpt-convert --make-vocab-size-divisible-by");
    padded_vocab_ = *stored;
    output_.line(" > padded vocab of the checkpoint kept (size: " + std::to_string(tokenizer_->vocab_size()) +
                 ") with " + std::to_string(padded_vocab_ - tokenizer_->vocab_size()) + " dummy tokens (new size: " +
                 std::to_string(padded_vocab_) + ")");
  }

  // extra_json["parallel_layout"] of the checkpoints: the layout this run trains with.
  std::string parallel_layout_json() const {
    const ParallelOptions& p = options_.parallel;
    const auto flag = [](bool b) { return b ? std::string("true") : std::string("false"); };
    return "{\"world_size\": " + std::to_string(p.world_size) + ", \"tensor_model_parallel_size\": " +
           std::to_string(p.tensor_model_parallel_size) + ", \"pipeline_model_parallel_size\": " +
           std::to_string(p.pipeline_model_parallel_size) + ", \"data_parallel_size\": " +
           std::to_string(p.data_parallel_size) + ", \"sequence_parallel\": " + flag(p.sequence_parallel) +
           ", \"use_distributed_optimizer\": " + flag(p.use_distributed_optimizer) +
           ", \"stored_tensors\": \"per_rank\"}";
  }

  // One writer per --save directory, for the whole run; what interrupted saves left there is
  // cleared only once the lock is held.
  void lock_save_directory() {
    if (options_.checkpoint.save) save_lock_.emplace(open_save_directory(*options_.checkpoint.save));
  }

  // Before any training: a save this run will make must not meet a committed iteration.
  void require_planned_saves_new_in_save_directory() {
    const CheckpointOptions& c = options_.checkpoint;
    if (!c.save) return;
    std::int64_t last = options_.total_train_iters();
    const std::optional<std::int64_t>& exit_interval = options_.logging.exit_interval;
    if (exit_interval && *exit_interval > 0)
      last = std::min(last, (progress_.iteration / *exit_interval + 1) * *exit_interval);
    require_planned_saves_new(*c.save, progress_.iteration, last, *c.save_interval);
  }

  TrainCheckpointParts parts() {
    return {model_->parameters(), *optimizer_, *scheduler_, progress_, loss_scaler_ ? &*loss_scaler_ : nullptr};
  }

  void load_checkpoint() {
    const CheckpointOptions& c = options_.checkpoint;
    if (!c.load) return;
    TrainCheckpointLoadSettings s;
    s.load_optimizer = !c.no_load_optim;
    s.load_rng = !c.no_load_rng;
    s.finetune = c.finetune;
    s.scheduler_resume = scheduler_resume(options_);
    const auto directory = load_train_checkpoint(*c.load, parts(), s);
    if (!directory) {
      output_.line("WARNING: could not find the metadata file " + ckpt::tracker_file_path(*c.load));
      output_.line("    will not load any checkpoints and will start from random");
      return;
    }
    // Without the checkpoint's random state the dropout streams continue past those the
    // iterations so far would have used.
    if (c.no_load_rng || c.finetune) progress_.micro_steps = progress_.consumed_train_samples / micro_batch();
    output_.line("  successfully loaded checkpoint from " + *c.load + " " + model_parallel_coordinates() +
                 " at iteration " + std::to_string(progress_.iteration));
  }

  void build_data() {
    data_ = open_train_data(options_, *tokenizer_);
    BatchPrefetcher::Settings p;
    p.start_sample = progress_.consumed_train_samples;
    p.micro_batch_size = micro_batch();
    p.data_parallel_size = data_parallel_size();
    p.data_parallel_rank = data_parallel_.rank();
    p.capacity = static_cast<std::size_t>(std::max<std::int64_t>(2, 2 * microbatches()));
    p.split_name = "train";
    train_batches_ = std::make_unique<BatchPrefetcher>(data_.train(), p);
    if (do_valid()) valid_ = std::make_unique<Evaluator>(*model_, data_.valid(), evaluation_settings(Split::Valid));
  }

  bool do_valid() const { return data_.valid() && options_.logging.eval_iters > 0; }
  bool do_test() const { return data_.test() && options_.logging.eval_iters > 0; }

  EvaluationSettings evaluation_settings(Split split) const {
    EvaluationSettings e;
    e.start_sample = split == Split::Valid ? progress_.consumed_valid_samples : 0;
    e.micro_batch_size = micro_batch();
    e.num_microbatches = microbatches();
    e.data_parallel = &data_parallel_;
    if (pipeline_parallel_size() > 1) e.pipeline = &pipeline_;
    e.eval_iters = options_.logging.eval_iters;
    e.split_name = split_name(split);
    return e;
  }

  ExitReason train_loop() {
    const std::int64_t train_iters = options_.total_train_iters();
    timer_.start();
    while (progress_.iteration < train_iters) {
      save_when_batch_size_changes();
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
      const ExitReason reason = checkpoint_and_decide_exit();
      if (reason != ExitReason::None) return reason;
    }
    return ExitReason::None;
  }

  IterationRecord train_step() {
    GptParameters& params = model_->parameters();
    params.zero_grads();
    if (step_marks_.size() >= kMaxStepMarks) fold_step_marks();
    StepMarks& marks = step_marks_.emplace_back();
    marks.start = backend_.record_timed_event();
    // [Σ CE · mask, Σ mask] of this rank's micro-batches.
    double sums[2] = {0.0, 0.0};
    const std::int64_t dp = data_parallel_size();
    const std::int64_t batch_size = global_batch();
    announce_batch_size(batch_size);
    const std::int64_t n = batch_size / (micro_batch() * dp);
    // This rank's micro-batch m is micro-batch m·dp + rank of the global batch (the sampler's
    // order): its dropout masks are the ones the one-rank run draws for it.
    const auto dropout_of = [&](std::int64_t m) {
      const std::int64_t global_micro = m * dp + data_parallel_.rank();
      return DropoutRng{progress_.dropout_seed, static_cast<std::uint64_t>(progress_.micro_steps + global_micro)};
    };
    // Each micro-batch's loss is scaled by 1 / (n · dp): Megatron's 1 / num_microbatches with the
    // data-parallel average (DDP's gradient_scaling_factor 1 / dp) folded in, so the sum over
    // ranks is the mean. With --calculate-per-token-loss it is not scaled (DDP's factor is 1
    // then too); the sum over micro-batches and ranks is divided by the tokens below.
    const bool per_token = options_.optim.calculate_per_token_loss;
    const LossReduction reduction = per_token ? LossReduction::kSum : LossReduction::kMicroBatchMean;
    // Megatron's schedules seed the backward with the loss times the scaler's scale
    // (config.grad_scale_func); the gradients are unscaled after their reduction, below.
    const float loss_scale = loss_scaler_ ? loss_scaler_->scale() : 1.0f;
    if (executor_) {
      // Every stage reads the micro-batches; each uses its part (tokens first, labels last).
      const LossSum s = executor_->train(n, [&] { return train_batches_->next(); }, dropout_of, n * dp, reduction,
                                         loss_scale, [&] { if (overlap_) overlap_->arm(); });
      sums[0] = s.loss_sum;
      sums[1] = s.token_count;
    } else {
      // The loss's sums stay on the device until the last micro-batch is queued: one read-back
      // per iteration, not one per micro-batch.
      for (std::int64_t m = 0; m < n; ++m) {
        const HostMicroBatch batch = train_batches_->next();
        if (overlap_ && m == n - 1) overlap_->arm();
        model_->forward_backward(batch.view(), dropout_of(m), n * dp, reduction, loss_scale, loss_sums_.view(),
                                 m > 0);
      }
      backend_.copy_to_host(DeviceSpan<const double>(loss_sums_.view()), std::span<double>(sums));
    }
    progress_.micro_steps += n * dp;
    marks.forward_backward_done = backend_.record_timed_event();
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
      if (poison) backend_.fill(params.grads().first(1), std::numeric_limits<float>::quiet_NaN());
    } else {
      if (poison) backend_.fill(params.grads().first(1), std::numeric_limits<float>::quiet_NaN());
      // The whole reduction is the backward's tail: started alone, nothing computes beside it
      // (dist::Communicator::set_alone).
      const dist::StartedAlone alone(data_parallel_, true);
      optimizer_->reduce_gradients();
    }
    model_->all_reduce_sequence_parallel_grads();
    marks.grads_synced = backend_.record_timed_event();
    // Megatron's loss reporting: [Σ loss, Σ tokens] all-reduced over the data-parallel group.
    if (dp > 1) data_parallel_.all_reduce(std::span<double>(sums), dist::ReduceOp::Sum);
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
      record.params_norm = params_l2_norm(model_->parameters(), model_parallel_);
    }

    progress_.iteration = record.iteration;
    record.global_batch_size = batch_size;
    progress_.consumed_train_samples += batch_size;
    progress_.num_floating_point_operations_so_far += flops_of_iteration(batch_size);
    // A skipped iteration's loss is not averaged; a NaN marks it as a NaN iteration. Under loss
    // scaling a skip with a finite loss is an overflow of the scaled gradients, which Megatron
    // counts as skipped only; while the dynamic scale can still drop, it is the scaler's to
    // resolve, not a reason to stop.
    losses_.add({{"lm loss", record.skipped && !overflow ? std::numeric_limits<double>::quiet_NaN() : record.loss}},
                record.skipped);
    if (overflow && scale_could_drop) return record;
    consecutive_nonfinite_ = record.skipped ? consecutive_nonfinite_ + 1 : 0;
    if (record.skipped) {
      log::warn("iteration " + std::to_string(record.iteration) + ": loss " + number_text(record.loss) +
                ", grad norm " + number_text(record.grad_norm) + " (not finite): update skipped");
      if (consecutive_nonfinite_ >= settings_.max_consecutive_nonfinite_iterations) stop_on_nonfinite();
    }
    return record;
  }

  // Megatron's train(): when the ramp-up changes the number of micro-batches, a checkpoint of the
  // state before the first iteration of the new size (not at the run's first iteration, and not a
  // second time for an iteration just saved).
  void save_when_batch_size_changes() {
    const std::int64_t batch_size = global_batch();
    const bool changed = previous_batch_size_ != 0 && batch_size != previous_batch_size_;
    previous_batch_size_ = batch_size;
    if (changed && options_.checkpoint.save && progress_.iteration != 0 &&
        last_saved_iteration_ != progress_.iteration) {
      save_checkpoint();
    }
  }

  // Megatron's calculator logs the ramp-up's sizes as they change ('setting initial batch size
  // to N', 'ramping up batch size from N to M').
  void announce_batch_size(std::int64_t batch_size) {
    if (!batch_sizes_.ramps() || batch_size == announced_batch_size_) return;
    output_.line(announced_batch_size_ == 0 ? "setting initial batch size to " + std::to_string(batch_size)
                                            : "ramping up batch size from " + std::to_string(announced_batch_size_) +
                                                  " to " + std::to_string(batch_size));
    announced_batch_size_ = batch_size;
  }

  // Megatron's _unscale_main_grads_and_check_for_nan: the reduced gradients (this rank's shard
  // of them with the distributed optimizer) times 1 / scale, in fp32; a gradient that overflowed
  // stays Inf or NaN and the optimizer's norm skips the step.
  void unscale_gradients() {
    const BufferShard shard = optimizer_->shard();
    backend_.scale(model_->parameters().grads().subspan(shard.begin, shard.size()), loss_scaler_->inverse_scale());
  }

  // Megatron's finalize_model_grads under --calculate-per-token-loss: the reduced gradients scaled
  // by 1 / (the global batch's loss-mask sum, over the pipeline's last stage and the data-
  // parallel ranks), in fp32 as its scale_gradients does; nothing when there are no tokens.
  void divide_gradients_by_tokens(double tokens) {
    if (!(tokens > 0.0)) return;
    const BufferShard shard = optimizer_->shard();
    backend_.scale(model_->parameters().grads().subspan(shard.begin, shard.size()),
                   static_cast<float>(1.0 / tokens));
  }

  // The scheduler's rate for Megatron's is_decoupled_lr group: its own max and min, the same
  // schedule (megatron/core/optimizer_param_scheduler.py get_lr of a group with max_lr/min_lr).
  std::optional<double> decoupled_lr() const {
    const OptimizationOptions& o = options_.optim;
    if (!o.decoupled_lr) return std::nullopt;
    return scheduler_->lr(*o.decoupled_lr, o.decoupled_min_lr.value_or(o.min_lr));
  }

  // Whether the iteration's log line or TensorBoard scalars show the --log-num-zeros-in-grad and
  // --log-params-norm statistics: Megatron computes them every iteration, but only these
  // iterations show them, and counting zeros reads the gradients back to the host. Every rank
  // decides alike (the statistics are collective).
  bool logs_statistics(std::int64_t iteration) const {
    const LoggingOptions& l = options_.logging;
    return iteration % l.log_interval == 0 || (l.tensorboard_dir && iteration % l.tensorboard_log_interval == 0);
  }

  // A loss or norm for a message: "nan", "inf" or the log line's %.6E.
  static std::string number_text(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.6E", v);
    return buffer;
  }

  [[noreturn]] void stop_on_nonfinite() {
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

  // Megatron's mixed-precision optimizer returns no norm for a step it skipped, and its log line
  // and scalars then leave the norm out.
  std::optional<double> logged_grad_norm(const IterationRecord& record) const {
    if (record.skipped && loss_scaler_) return std::nullopt;
    return record.grad_norm;
  }

  void write_tensorboard_scalars(const IterationRecord& record) {
    TrainingScalars s;
    s.iteration = progress_.iteration;
    s.consumed_samples = progress_.consumed_train_samples;
    // The rate the log line prints: the scheduler's after this iteration's step, as Megatron reads it.
    s.learning_rate = scheduler_->lr();
    s.decoupled_learning_rate = decoupled_lr();
    s.batch_size = record.global_batch_size;
    s.losses = {{"lm loss", record.loss}};
    s.loss_scale = record.loss_scale;
    s.grad_norm = logged_grad_norm(record);
    s.num_zeros = record.num_zeros;
    s.params_norm = record.params_norm;
    tensorboard_->training_iteration(s);
  }

  void log_iteration(const IterationRecord& record, std::int64_t train_iters) {
    IterationLog g;
    g.iteration = progress_.iteration;
    g.train_iters = train_iters;
    g.consumed_samples = progress_.consumed_train_samples;
    const std::int64_t iterations = std::max<std::int64_t>(1, losses_.iterations());
    g.seconds_per_iteration = timer_.lap() / static_cast<double>(iterations);
    if (options_.logging.log_throughput)
      g.tflops_per_gpu = throughput_tflops_per_gpu(flops_of_iteration(record.global_batch_size), g.seconds_per_iteration,
                                                   options_.parallel.world_size);
    g.learning_rate = scheduler_->lr();
    g.decoupled_learning_rate = decoupled_lr();
    g.global_batch_size = record.global_batch_size;
    g.losses = losses_.averages();
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
    take_timing(data_parallel_, g.data_parallel_comm_ms, g.data_parallel_comm_exposed_ms, g.data_parallel_comm_parts);
    take_step_phases(g);
    take_timing(tensor_parallel_, g.tensor_parallel_comm_ms, g.tensor_parallel_comm_exposed_ms,
                g.tensor_parallel_comm_parts);
    take_timing(pipeline_, g.pipeline_parallel_comm_ms, g.pipeline_parallel_comm_exposed_ms,
                g.pipeline_parallel_comm_parts);
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
  void report_memory() {
    memory_reported_ = true;
    const std::optional<Backend::MemoryUse> use = backend_.memory_use();
    if (!use) return;
    output_.line(format_memory_report(world_.rank(), progress_.iteration, use->allocated, use->max_allocated,
                                      use->reserved, use->max_reserved));
  }
  bool memory_reported_ = false;

  void evaluate_and_print(Evaluator& evaluator, const std::string& event, const std::string& prefix) {
    const LossValues losses = evaluator.evaluate();
    std::string block = format_validation_block(prefix, losses);
    if (!block.empty() && block.back() == '\n') block.pop_back();
    last_output_.line(block);
    output_.metrics(validation_metrics_json(event, progress_.iteration, losses, now_stamp()));
    // Megatron writes the test set's losses under the validation names too.
    if (tensorboard_) tensorboard_->evaluation(progress_.iteration, progress_.consumed_train_samples, losses);
  }

  // Megatron's checkpoint_and_decide_exit.
  ExitReason checkpoint_and_decide_exit() {
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
  ExitReason agreed_exit_reason() {
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

  // Every rank writes its own part of the checkpoint (train_checkpoint.hpp): no gather, and no
  // rank holds more than its shard; rank 0 publishes the directory once all have written.
  void save_checkpoint() {
    timer_.stop();
    finish_param_gather();
    const std::string& dir = *options_.checkpoint.save;
    output_.line("saving checkpoint at iteration " + padded_iteration(progress_.iteration) + " to " + dir +
                 " in hdf5 format");
    TrainCheckpointSaveSettings s;
    s.save_optimizer = !options_.checkpoint.no_save_optim;
    s.save_rng = !options_.checkpoint.no_save_rng;
    s.args_json = args_json_;
    s.tokenizer_json = tokenizer_json_;
    s.parallel_layout_json = parallel_layout_json_;
    ckpt::WorldLayout layout;
    layout.tensor_model_parallel_size = static_cast<int>(tensor_parallel_size());
    layout.pipeline_model_parallel_size = static_cast<int>(pipeline_parallel_size());
    layout.data_parallel_size = static_cast<int>(data_parallel_size());
    layout.tensor_model_parallel_rank = tensor_parallel_.rank();
    layout.pipeline_model_parallel_rank = pipeline_parallel_size() > 1 ? pipeline_.rank() : 0;
    layout.data_parallel_rank = data_parallel_.rank();
    last_checkpoint_ = save_train_checkpoint(dir, parts(), s, world_, layout);
    last_saved_iteration_ = progress_.iteration;
    output_.line("  successfully saved checkpoint from iteration " + padded_iteration(progress_.iteration) +
                 " to " + dir + " " + model_parallel_coordinates());
    timer_.start();
  }

  // --bf16 / --fp16 store activations and the weights' compute copy in bf16 / fp16 where the
  // backend can (fp32 master weights, gradients and optimizer state stay); --fp16 also scales the
  // loss (loss_scaler_) on every backend. A backend that cannot computes in fp32, with a warning.
  void apply_precision() {
    const Precision p = options_.optim.precision;
    if (p == Precision::Fp32) return;
    const bool fp16 = p == Precision::Fp16;
    if (backend_.set_matmul_precision(fp16 ? Backend::MatmulPrecision::kFp16 : Backend::MatmulPrecision::kBf16))
      return;
    log::warn(std::string(fp16 ? "--fp16" : "--bf16") + ": the " + backend_.name() + " backend computes in fp32 here" +
              (fp16 ? "; the loss scaling is applied" : ""));
  }

  void final_evaluations() {
    if (do_valid()) {
      evaluate_and_print(*valid_, "validation", validation_set_prefix(progress_.iteration));
      progress_.consumed_valid_samples += valid_->samples_per_evaluation();
    }
    if (do_test()) {
      Evaluator test(*model_, data_.test(), evaluation_settings(Split::Test));
      evaluate_and_print(test, "test", test_set_prefix(progress_.iteration));
    }
  }

  const TrainOptions& options_;
  const TrainerSettings& settings_;
  const TrainerHooks& hooks_;
  ExitConditions exit_;
  // The groups of a lone process, used when the settings give none.
  dist::LocalCommunicator own_world_{"world", 0, nullptr, nullptr};
  dist::LocalCommunicator own_data_parallel_{"data-parallel", 0, nullptr, nullptr};
  dist::LocalCommunicator own_tensor_parallel_{"tensor-model-parallel", 0, nullptr, nullptr};
  dist::LocalCommunicator own_pipeline_{"pipeline-model-parallel", 0, nullptr, nullptr};
  dist::Communicator& world_;
  dist::Communicator& data_parallel_;
  dist::Communicator& tensor_parallel_;
  dist::Communicator& pipeline_;
  // The gradient norm's group: tensor × pipeline (the tensor-parallel group without a pipeline).
  dist::Communicator* model_parallel_;
  bool chief_;           // world rank 0: prints, writes the metrics file and the checkpoints
  std::ostream discarded_{nullptr};  // where the other ranks' lines go
  // Megatron's print_rank_0 lines (and --metrics-file) on world rank 0; its print_rank_last lines
  // (iterations, validation) on the last rank, which holds the same values.
  RunOutput output_;
  RunOutput last_output_;
  std::optional<TensorBoardLog> tensorboard_;  // --tensorboard-dir, on rank 0
  std::unique_ptr<Backend> backend_owner_;
  Backend& backend_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::int64_t padded_vocab_ = 0;
  std::unique_ptr<GptModel> model_;
  // [Σ CE · mask, Σ mask] of the iteration's micro-batches, on the device until read back.
  DeviceArray<double> loss_sums_{backend_, 2};
  // Runs the micro-batches through the pipeline stages (null without a pipeline).
  std::unique_ptr<PipelineExecutor> executor_;
  std::unique_ptr<AdamWOptimizer> optimizer_;
  // --overlap-grad-reduce with more than one data-parallel rank (null otherwise); the model's
  // parameter hooks point to it.
  std::unique_ptr<OverlappedDataParallel> overlap_;
  // The queue events of each step since the last log line (take_step_phases).
  struct StepMarks {
    std::unique_ptr<QueueEvent> start, forward_backward_done, grads_synced, optimizer_done;
  };
  std::vector<StepMarks> step_marks_;
  static constexpr std::size_t kMaxStepMarks = 64;
  struct StepPhases {
    double forward_backward = 0.0, grads_sync = 0.0, optimizer = 0.0;  // seconds
    std::int64_t steps = 0;
  };
  StepPhases phases_;  // of the steps folded since the last log line
  std::unique_ptr<OptimizerParamScheduler> scheduler_;
  std::optional<LossScaler> loss_scaler_;  // --fp16 (or --loss-scale under Megatron's rule)
  GptFlopsShape flops_shape_;
  GlobalBatchSizeSchedule batch_sizes_{options_.global_batch_size_schedule()};
  std::int64_t announced_batch_size_ = 0;  // the ramp-up's size last printed
  std::string args_json_;
  std::string tokenizer_json_;
  std::string parallel_layout_json_ = "{}";
  TrainingProgress progress_;
  TrainData data_;
  // Declared after the model and data they read: destroyed (threads joined) first.
  std::unique_ptr<BatchPrefetcher> train_batches_;
  std::unique_ptr<Evaluator> valid_;
  LossAccumulator losses_;
  IntervalTimer timer_;
  std::int64_t consecutive_nonfinite_ = 0;
  std::optional<std::string> last_checkpoint_;
  std::int64_t last_saved_iteration_ = -1;
  std::int64_t previous_batch_size_ = 0;  // of the last iteration run; 0 before the first
  std::optional<ckpt::SaveDirectoryLock> save_lock_;
};

}  // namespace

TrainResult train_gpt(const TrainOptions& options, const TrainerSettings& settings, const TrainerHooks& hooks) {
  if (settings.max_consecutive_nonfinite_iterations <= 0)
    throw Error("internal error: max_consecutive_nonfinite_iterations must be positive");
  TrainingRun run(options, settings, hooks);
  return run.run();
}

}  // namespace mgt
