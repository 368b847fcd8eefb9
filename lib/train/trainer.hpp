// mgt-train's work: Megatron's pretrain_gpt.py loop, on one process or over tensor-, pipeline-
// and data-parallel ranks.
//
//   setup     tokenizer and padded vocabulary, model (initialised from --seed), AdamW, LR/WD
//             scheduler; --load restores a checkpoint; the data indices are built or found in
//             the dataset cache and read ahead on a background thread from the consumed samples.
//   iteration this rank's micro-batches of the global batch (Megatron's sampler order) of forward
//             and backward with dropout masks from (seed, global micro step) — the ranks of a
//             tensor-parallel group read the same micro-batches and each computes its shards —
//             then the sequence-parallel gradients all-reduced over the tensor-parallel group, the
//             gradients reduced over the data-parallel group; gradient norm over the whole model
//             (replicated tensors counted once); with pipeline stages, the micro-batches run
//             through the 1F1B schedule (pipeline_executor.hpp), each stage computing its layers,
//             and a tied word embedding's gradient is summed over the first and last stages; a
//             non-finite loss or gradient skips the update (counted as skipped and NaN) — a run of
//             them stops with an error and the last checkpoint untouched; else clip, AdamW (its
//             state sharded with --use-distributed-optimizer), scheduler step. The logged loss is
//             summed over the ranks, so it is the one-rank run's loss up to rounding.
//             Under --fp16 (loss_scaler.hpp) the loss gradient is multiplied by the loss scale and
//             the reduced gradients by its inverse; an overflow (finite loss, gradients not
//             finite) is skipped and counted as skipped only, and updates the dynamic scale
//             instead of counting towards the stop while the scale can still drop.
//   then      the Megatron log line every --log-interval, validation every --eval-interval,
//             checkpoint every --save-interval, and the exit conditions (exit signal,
//             --exit-duration-in-mins, --exit-interval: save with --save, stop cleanly).
//   end       final checkpoint, validation and test evaluations.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>

#include "train/moe_loss_log.hpp"
#include "dist/communicator.hpp"
#include "kernels/backend.hpp"
#include "train/exit_conditions.hpp"
#include "train/train_options.hpp"

namespace mgt {

// What one training iteration did, for tests and tools watching a run.
struct IterationRecord {
  std::int64_t iteration = 0;  // the iteration just completed (1 for the first)
  double loss = 0.0;           // Σ CE·mask / Σ mask over the global batch
  double grad_norm = 0.0;      // before clipping; not finite when the step was skipped
  double learning_rate = 0.0;  // the rate this step used
  std::int64_t global_batch_size = 0;  // this iteration's (--rampup-batch-size changes it)
  std::optional<double> decoupled_learning_rate;  // --decoupled-lr: the embedding's and output layer's
  bool skipped = false;        // loss or gradients not finite: no update
  double loss_scale = 1.0;     // the loss scale after this iteration's update (1.0 without scaling)
  // At iterations that log them (the log line's, or TensorBoard's), with --log-num-zeros-in-grad
  // and --log-params-norm; num_zeros is absent when the step was skipped, as in Megatron.
  std::optional<double> num_zeros;
  std::optional<double> params_norm;
  // MoE models: the auxiliary losses as Megatron logs them (train/moe_loss_log.hpp).
  MoeLossValues moe_losses;
};

struct TrainerHooks {
  // After each iteration, before the log line, evaluation, checkpoint and exit checks.
  std::function<void(const IterationRecord&)> after_iteration;
  // Fault injection: when it returns true for an iteration (1-based), that iteration's gradients
  // are made NaN before the optimizer sees them.
  std::function<bool(std::int64_t iteration)> poison_gradients;
  // Fault injection for --check-for-spiky-loss: when it returns true for an iteration, the check
  // sees that iteration's micro-batch losses multiplied by 1000 (training is not changed).
  std::function<bool(std::int64_t iteration)> spike_losses;
};

// The ranks a run spans, as lib/dist's process groups give them (train_launch.hpp). Left null,
// the run is one process alone and its groups are groups of one.
struct TrainingRanks {
  // Every rank of the job; host memory only (agreement on errors and exits).
  dist::Communicator* world = nullptr;
  // This rank's data-parallel group, able to move buffers of the run's backend: gradients,
  // optimizer shards and weights, and the loss sums. Its size must be the options' data-parallel
  // size.
  dist::Communicator* data_parallel = nullptr;
  // This rank's tensor-model-parallel group, able to move the backend's buffers: the model's
  // collectives, the gradient norm's sums and the gathering of checkpoints. Its size must be
  // --tensor-model-parallel-size. With pipeline parallelism at 1 it is also the model-parallel
  // group. Null: a group of one.
  dist::Communicator* tensor_model_parallel = nullptr;
  // With --pipeline-model-parallel-size > 1: this rank's pipeline-parallel group (rank = stage),
  // moving activations and gradients between stages and gathering checkpoints; the
  // model-parallel group (tensor × pipeline: one replica), over which the gradient norm is
  // summed; and on the first and last stages the embedding group, over which a tied word
  // embedding's gradient is summed (null elsewhere). Null: a pipeline of one stage.
  dist::Communicator* pipeline_model_parallel = nullptr;
  dist::Communicator* model_parallel = nullptr;
  dist::Communicator* embedding = nullptr;
  // With --context-parallel-size > 1: this rank's context-parallel group (the ring of its
  // attention) and its data-parallel group with context parallelism (Megatron's dp-cp group:
  // the gradients' reduction, the distributed optimizer's shards, the loss sums and the
  // checkpoint's writers), both able to move the backend's buffers. Null: no context parallelism.
  dist::Communicator* context_parallel = nullptr;
  dist::Communicator* data_parallel_with_context = nullptr;
  // With --expert-model-parallel-size > 1: the ranks sharing out the experts (the tokens'
  // all-to-all) and the ranks holding the same experts (their gradients' reduction and the
  // distributed optimizer's shards of them), both able to move the backend's buffers, and the
  // ranks holding one copy of every expert (Megatron's expert tensor-model-pipeline group: the
  // experts' norms). Null: no expert parallelism. Set too (the expert-model-parallel group of
  // one rank) when the experts have expert-tensor-parallel ranks of their own.
  dist::Communicator* expert_model_parallel = nullptr;
  dist::Communicator* expert_data_parallel = nullptr;
  dist::Communicator* expert_tensor_model_pipeline = nullptr;
  // With --expert-tensor-parallel-size other than 1 and the tensor-parallel size: Megatron's
  // expert tensor-and-model-parallel group, the ranks the tokens travel between (model/
  // moe_layer.hpp). Null otherwise.
  dist::Communicator* expert_tensor_and_model_parallel = nullptr;
};

struct TrainerSettings {
  // Megatron's printed lines; null: standard output. World rank 0 prints Megatron's print_rank_0
  // lines (and writes --metrics-file), the last rank its print_rank_last lines (iterations and
  // validation, whose values every rank holds alike).
  std::ostream* out = nullptr;
  // The backend to compute on (must outlive the run); null: one made from --device.
  Backend* backend = nullptr;
  TrainingRanks ranks;
  // The scheduler's job id (Slurm's SLURM_JOB_ID, which train_launch.hpp reads), "" outside one:
  // --log-progress names the job with it.
  std::string job_id;
  // This many consecutive iterations with a non-finite loss or gradient stop training.
  std::int64_t max_consecutive_nonfinite_iterations = 10;
};

struct TrainResult {
  std::int64_t iteration = 0;  // the last iteration completed
  ExitReason exit_reason = ExitReason::None;  // None: --train-iters reached
  std::optional<std::string> last_checkpoint;  // directory saved last by this run
};

// Runs the whole training. Throws mgt::Error (UsageError for flags mgt-train refuses).
TrainResult train_gpt(const TrainOptions& options, const TrainerSettings& settings = {},
                      const TrainerHooks& hooks = {});

// mgt-train's entry point (flags, ranks, --help, --dry-run) is train_launch.hpp.

}  // namespace mgt
