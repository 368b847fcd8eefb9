// The state of one training run (train_gpt, trainer.hpp) and the parts of its work, each defined in
// a file of its own:
//
//   trainer.cpp           the run's order: set-up, the loop of steps, the end
//   training_setup.cpp    the ranks' layout, the model, optimizer, scheduler, checkpoint to resume
//                         and the data, built before the first step
//   training_step.cpp     one iteration: the micro-batches' forwards and backwards, the gradients'
//                         reductions, the optimizer's step, the non-finite stop
//   training_report.cpp   what a run prints and writes: the log line, its timings, TensorBoard's
//                         scalars, the memory report, evaluations
//   save_exit_policy.cpp  when to save and when to stop: the save directory, the checkpoints, the
//                         exit conditions agreed by every rank
//
// Private to lib/train: nothing outside trainer.hpp's train_gpt makes a TrainingRun.
#pragma once
#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "ckpt/checkpoint_layout.hpp"
#include "data/dataset_split.hpp"
#include "dist/communicator.hpp"
#include "dist/local_communicator.hpp"
#include "kernels/backend.hpp"
#include "model/gpt_model.hpp"
#include "train/adamw_optimizer.hpp"
#include "train/async_checkpoint_save.hpp"
#include "train/batch_prefetcher.hpp"
#include "train/evaluation.hpp"
#include "train/exit_conditions.hpp"
#include "train/flops.hpp"
#include "train/interval_timer.hpp"
#include "train/loss_scaler.hpp"
#include "train/lr_schedule.hpp"
#include "train/overlapped_data_parallel.hpp"
#include "train/pipeline_executor.hpp"
#include "train/progress_log.hpp"
#include "train/run_output.hpp"
#include "train/spiky_loss_check.hpp"
#include "train/step_phase_timer.hpp"
#include "train/tensorboard_log.hpp"
#include "train/train_checkpoint.hpp"
#include "train/train_data.hpp"
#include "train/train_options.hpp"
#include "train/trainer.hpp"
#include "train/training_log.hpp"

namespace mgt {

// The time stamp of Megatron's '[after ...] datetime:' lines and of the metrics.
inline std::string now_stamp() { return log_timestamp(std::chrono::system_clock::now()); }

class TrainingRun {
public:
  // Checks that the groups given match the validated options; builds nothing yet (run() does).
  TrainingRun(const TrainOptions& options, const TrainerSettings& settings, const TrainerHooks& hooks);

  // The whole run (trainer.cpp).
  TrainResult run();

private:
  // ---- trainer.cpp
  ExitReason train_loop();

  // ---- training_setup.cpp
  void print_layout();
  void open_tensorboard();
  void build_model();
  void apply_precision();
  void keep_checkpoint_padded_vocab();
  void register_data_parallel_buffers();
  void build_overlap();
  void build_fp8_param_gather();
  void report_fp8_param_gather(const Fp8ParamGather& gather, const std::string& layers, const std::string& group);
  std::string parallel_layout_json() const;
  void load_checkpoint();
  void load_upcycled_checkpoint_of_dense_model();
  void build_data();
  EvaluationSettings evaluation_settings(Split split) const;

  // ---- training_step.cpp
  IterationRecord train_step();
  // --iterations-to-skip (Megatron's train loop): the step's micro-batches read and dropped, as
  // its dummy_train_step reads them, counted as consumed and as skipped; no forward, no update,
  // no scheduler step, no log line, evaluation, save or exit check.
  void skip_iteration();
  void unscale_gradients();
  void divide_gradients_by_tokens(double tokens);
  std::optional<double> decoupled_lr() const;
  bool logs_statistics(std::int64_t iteration) const;
  [[noreturn]] void stop_on_nonfinite();

  // ---- training_report.cpp
  void announce_batch_size(std::int64_t batch_size);
  std::optional<double> logged_grad_norm(const IterationRecord& record) const;
  void write_tensorboard_scalars(const IterationRecord& record);
  void log_iteration(const IterationRecord& record, std::int64_t train_iters);
  void report_memory();
  void evaluate_and_print(Evaluator& evaluator, const std::string& event, const std::string& prefix,
                          bool to_tensorboard = true);
  // The validation and test evaluations at the end (after training, or instead of it with
  // --skip-train, whose losses Megatron leaves out of TensorBoard).
  void final_evaluations(bool to_tensorboard);

  // ---- save_exit_policy.cpp
  static ExitConditions::Settings exit_settings(const LoggingOptions& l);
  // Rank 0 takes the --save directory's lock (and, with --log-progress, starts its progress log).
  void lock_save_directory();
  // --log-progress: the progress log's line after a save of `iteration`.
  void log_progress_after_save(std::int64_t iteration, bool background);
  std::int64_t last_planned_iteration() const;
  void require_planned_saves_new_in_save_directory();
  void save_upcycled_checkpoint();
  TrainCheckpointSaveSettings checkpoint_save_settings() const;
  ckpt::WorldLayout checkpoint_layout() const;
  void save_when_batch_size_changes();
  ExitReason checkpoint_and_decide_exit();
  ExitReason agreed_exit_reason();
  void save_checkpoint();
  // --async-save: publishes the save in flight once every rank has written it (collective;
  // `blocking` waits for the writers).
  void finalize_async_save(bool blocking);
  void report_save(std::int64_t iteration, const SavedTrainCheckpoint& saved, bool background);

  // ---- shared by the parts
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
  // The ranks over which the gradients are reduced: data-parallel × context-parallel.
  std::int64_t gradient_group_size() const { return gradients_.size(); }
  std::int64_t context_parallel_size() const { return context_parallel_.size(); }
  // The next micro-batch of this rank: under context parallelism its part of each sequence.
  HostMicroBatch next_train_batch();
  std::int64_t tensor_parallel_size() const { return tensor_parallel_.size(); }
  std::int64_t pipeline_parallel_size() const { return pipeline_.size(); }
  // Megatron's "[ t 1/2, p 1/1 ]": the tensor- and pipeline-parallel coordinates of the printing
  // rank (world rank 0).
  std::string model_parallel_coordinates() const {
    return "[ t 1/" + std::to_string(tensor_parallel_size()) + ", p 1/" + std::to_string(pipeline_parallel_size()) +
           " ]";
  }
  // --check-weight-hash-across-dp-replicas-interval: every replica's weights the same, or an
  // error on every rank naming the tensors that differ.
  void check_weight_hashes();
  // --check-for-spiky-loss: the observer of each micro-batch's loss (empty without the flag), and
  // the stop on every rank when some rank saw a spike (collective over the world).
  std::function<void(const LossSum&)> spiky_loss_observer() const;
  void stop_on_spiky_loss(std::int64_t iteration);
  // Where the weights are read outside a forward: the all-gathers still in flight complete first.
  void finish_param_gather() {
    if (overlap_) overlap_->finish_param_gather();
    Fp8ParamGather::catch_up({fp8_gather_.get(), fp8_expert_gather_.get()});
  }
  bool do_valid() const { return data_.valid() && options_.logging.eval_iters > 0; }
  bool do_test() const { return data_.test() && options_.logging.eval_iters > 0; }
  TrainCheckpointParts parts() {
    return {model_->parameters(), *optimizer_, *scheduler_, progress_, loss_scaler_ ? &*loss_scaler_ : nullptr,
            model_->fp8()};
  }

  const TrainOptions& options_;
  const TrainerSettings& settings_;
  const TrainerHooks& hooks_;
  // When the run started: --log-progress's job throughput counts from it.
  const std::chrono::system_clock::time_point started_at_ = std::chrono::system_clock::now();
  ExitConditions exit_;
  // The groups of a lone process, used when the settings give none.
  dist::LocalCommunicator own_world_{"world", 0, nullptr, nullptr};
  dist::LocalCommunicator own_data_parallel_{"data-parallel", 0, nullptr, nullptr};
  dist::LocalCommunicator own_tensor_parallel_{"tensor-model-parallel", 0, nullptr, nullptr};
  dist::LocalCommunicator own_pipeline_{"pipeline-model-parallel", 0, nullptr, nullptr};
  dist::LocalCommunicator own_context_parallel_{"context-parallel", 0, nullptr, nullptr};
  dist::Communicator& world_;
  dist::Communicator& data_parallel_;
  dist::Communicator& tensor_parallel_;
  dist::Communicator& pipeline_;
  dist::Communicator& context_parallel_;
  // data_parallel_ itself without context parallelism.
  dist::Communicator& gradients_;
  // The gradient norm's group: tensor × pipeline (the tensor-parallel group without a pipeline).
  dist::Communicator* model_parallel_;
  // With expert parallelism: the ranks sharing out the experts, those holding the same ones and
  // those holding one copy of each (null without).
  dist::Communicator* expert_model_parallel_;
  dist::Communicator* expert_data_parallel_;
  dist::Communicator* expert_tensor_model_pipeline_;
  dist::Communicator* expert_tensor_and_model_parallel_;
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
  std::unique_ptr<Bf16GradientCopy> bf16_gradients_;  // --grad-reduce-in-bf16 across ranks
  // --fp8-param-gather with the distributed optimizer over more than one rank (null otherwise);
  // the optimizer and overlap_ point to it.
  std::unique_ptr<Fp8ParamGather> fp8_gather_;
  // The same for the routed experts' region over more than one expert-data-parallel rank.
  std::unique_ptr<Fp8ParamGather> fp8_expert_gather_;
  // Megatron's level-1 timers of the steps since the last log line.
  StepPhaseTimer step_phases_;
  bool memory_reported_ = false;  // report_memory has run
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
  // --check-for-spiky-loss (null without): one per process, as Megatron's state machine, shared by
  // the training schedule and the evaluators.
  std::shared_ptr<SpikyLossCheck> spiky_loss_;
  std::optional<std::string> last_checkpoint_;
  std::int64_t last_saved_iteration_ = -1;
  std::int64_t previous_batch_size_ = 0;  // of the last iteration run; 0 before the first
  std::optional<ckpt::SaveDirectoryLock> save_lock_;
  // The --async-save save in flight (null: none). After the lock: abandoned (its staging
  // directory removed, the writer joined) before the lock is let go.
  std::unique_ptr<AsyncCheckpointSave> async_save_;
  // --log-progress with --save, on rank 0 (progress_log.hpp).
  std::optional<ProgressLog> progress_log_;
};

}  // namespace mgt
