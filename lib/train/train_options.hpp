// mgt-train's flags: Megatron-LM's pretraining flag names and defaults (core_v0.13.0 parser,
// spec/pretrain-flags.tsv), checked and completed the way Megatron's validate_args does, so a
// Megatron launch script ports by changing the program name. Flags Megatron has but mgt-train
// does not are refused by name; see core/command_line.hpp. Each flag is defined once, bound to
// its field here, in train/train_flags.cpp; the model-shape, tokenizer and compute flags there
// are the definitions mgt-eval and mgt-generate share (model/model_flags.hpp,
// tokenizer/tokenizer_flags.hpp, core/compute_flags.hpp).
//
// Fields whose Megatron default is None are std::optional until validation fills the ones
// Megatron fills (global batch size, FFN size, kv channels, split, start/end weight decay, ...).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/command_line.hpp"
#include "core/compute_flags.hpp"
#include "data/batch_size_rampup.hpp"
#include "data/dataset_flags.hpp"
#include "data/index_job.hpp"
#include "train/fp8_options.hpp"
#include "train/planner_options.hpp"
#include "model/model_shape_options.hpp"
#include "model/moe_options.hpp"
#include "model/pipeline_stage.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

struct OptimizationOptions {
  std::optional<std::int64_t> micro_batch_size;   // --micro-batch-size (required)
  std::optional<std::int64_t> global_batch_size;  // --global-batch-size: micro × data-parallel
  std::optional<std::int64_t> train_iters;        // --train-iters  } exactly one of the two
  std::optional<std::int64_t> train_samples;      // --train-samples }
  // --rampup-batch-size START INCREMENT SAMPLES (with --train-samples): data/batch_size_rampup.hpp.
  std::optional<BatchSizeRampup> rampup_batch_size;
  // --iterations-to-skip: the steps that start after these many completed iterations read their
  // micro-batches and drop them (Megatron's train loop).
  std::vector<std::int64_t> iterations_to_skip;
  std::optional<double> lr;                       // --lr (required)
  double min_lr = 0.0;                            // --min-lr
  // The word embedding's and output layer's own peak and final rates, same schedule shape
  // (Megatron's is_decoupled_lr parameter group); --decoupled-min-lr defaults to --min-lr.
  std::optional<double> decoupled_lr;             // --decoupled-lr
  std::optional<double> decoupled_min_lr;         // --decoupled-min-lr
  std::string lr_decay_style = "linear";          // constant | linear | cosine | inverse-square-root | WSD
  std::int64_t lr_warmup_iters = 0;               // --lr-warmup-iters
  std::optional<double> lr_warmup_fraction;       // --lr-warmup-fraction (of the decay steps)
  std::int64_t lr_warmup_samples = 0;             // --lr-warmup-samples
  double lr_warmup_init = 0.0;                    // --lr-warmup-init
  std::optional<std::int64_t> lr_decay_iters;     // --lr-decay-iters: train iters
  std::optional<std::int64_t> lr_decay_samples;   // --lr-decay-samples: train samples
  std::string lr_wsd_decay_style = "exponential"; // exponential | linear | cosine | minus_sqrt
  std::optional<std::int64_t> lr_wsd_decay_iters;    // --lr-wsd-decay-iters
  std::optional<std::int64_t> lr_wsd_decay_samples;  // --lr-wsd-decay-samples
  bool override_opt_param_scheduler = false;      // --override-opt_param-scheduler
  bool use_checkpoint_opt_param_scheduler = false;  // --use-checkpoint-opt_param-scheduler
  double weight_decay = 0.01;                     // --weight-decay
  std::optional<double> start_weight_decay;       // --start-weight-decay: weight decay when constant
  std::optional<double> end_weight_decay;         // --end-weight-decay: weight decay when constant
  std::string weight_decay_incr_style = "constant";  // constant | linear | cosine
  double clip_grad = 1.0;                         // --clip-grad (0 disables)
  double adam_beta1 = 0.9;                        // --adam-beta1
  double adam_beta2 = 0.999;                      // --adam-beta2
  double adam_eps = 1e-8;                         // --adam-eps
  std::string optimizer = "adam";                 // --optimizer: adam (AdamW semantics) only
  // Megatron's precision-aware optimizer (Transformer Engine's FusedAdam): Adam's moments kept in
  // the types named, read into fp32 for each step's update and stored rounded to nearest even.
  bool use_precision_aware_optimizer = false;     // --use-precision-aware-optimizer
  std::string main_grads_dtype = "fp32";          // --main-grads-dtype: fp32 only
  std::string main_params_dtype = "fp32";         // --main-params-dtype: fp32 only
  std::string exp_avg_dtype = "fp32";             // --exp-avg-dtype: fp32 | bf16
  std::string exp_avg_sq_dtype = "fp32";          // --exp-avg-sq-dtype: fp32 | bf16
  std::int64_t seed = kDefaultSeed;               // --seed
  // --calculate-per-token-loss: the gradient of Σ(CE · mask) over the global batch divided by its
  // tokens, in place of the mean of the micro-batches' per-token means.
  bool calculate_per_token_loss = false;
  Precision precision = Precision::Fp32;          // --bf16 | --fp16
  // Loss scaling (train/loss_scaler.hpp): dynamic under --fp16 unless --loss-scale is given.
  std::optional<double> loss_scale;               // --loss-scale: a constant scale
  double initial_loss_scale = 4294967296.0;       // --initial-loss-scale (2^32)
  double min_loss_scale = 1.0;                    // --min-loss-scale
  std::int64_t loss_scale_window = 1000;          // --loss-scale-window: good steps before doubling
  std::int64_t hysteresis = 2;                    // --hysteresis: overflow steps before halving
  bool deterministic_mode = false;                // --deterministic-mode: same bits on every run
};

// The dataset source flags are mgt-index's (data/dataset_flags.hpp), so that both build the same
// indices.
struct DataOptions : DatasetSourceOptions {
  bool mock_data = false;                         // --mock-data: Megatron's synthetic sequences
  std::string dataloader_type = "single";         // --dataloader-type: single | cyclic
  bool data_sharding = true;                      // not --no-data-sharding (cyclic's per-rank shares)
  TokenizerOptions tokenizer;                     // --tokenizer-type, --vocab-file, --merge-file,
                                                  // --vocab-size, --vocab-extra-ids
  bool eod_mask_loss = false;                     // --eod-mask-loss
  bool reset_position_ids = false;                // --reset-position-ids
  bool reset_attention_mask = false;              // --reset-attention-mask
};

struct CheckpointOptions {
  std::optional<std::string> save;                // --save DIR
  std::optional<std::int64_t> save_interval;      // --save-interval (alias --persistent-save-interval)
  std::optional<std::string> load;                // --load DIR
  bool no_save_optim = false;                     // --no-save-optim
  bool no_save_rng = false;                       // --no-save-rng
  bool no_load_optim = false;                     // --no-load-optim
  bool no_load_rng = false;                       // --no-load-rng
  bool finetune = false;                          // --finetune: weights only, iteration 0
  std::optional<std::int64_t> ckpt_step;          // --ckpt-step N: iteration N, not the tracker's
  // --use-checkpoint-args: the model's flags were taken from --load's checkpoint
  // (train/checkpoint_args_flags.hpp), its tokenizer model file too unless
  // --no-use-tokenizer-model-from-checkpoint-args.
  bool use_checkpoint_args = false;
  bool use_tokenizer_model_from_checkpoint_args = true;
  bool use_mp_args_from_checkpoint_args = false;  // --use-mp-args-from-checkpoint-args: the layout too
  bool exit_on_missing_checkpoint = false;        // --exit-on-missing-checkpoint
  bool async_save = false;                        // --async-save: files written in the background
  std::int64_t async_save_delay_ms = 0;           // --async-save-delay-ms (mgt, a testing aid)
};

struct LoggingOptions {
  std::int64_t log_interval = 100;                // --log-interval
  std::int64_t eval_interval = kDefaultEvalInterval;  // --eval-interval
  std::int64_t eval_iters = kDefaultEvalIters;    // --eval-iters
  bool skip_train = false;                        // --skip-train: evaluate the loaded model, no training
  std::optional<std::int64_t> exit_interval;      // --exit-interval
  std::optional<std::int64_t> exit_duration_in_mins;  // --exit-duration-in-mins
  bool exit_signal_handler = false;               // --exit-signal-handler
  std::string exit_signal = "SIGTERM";            // --exit-signal (mgt): the signal it waits for
  bool log_throughput = false;                    // --log-throughput
  bool log_progress = false;                      // --log-progress: SAVE/progress.txt
  bool profile = false;                           // --profile
  std::vector<std::int64_t> profile_ranks{0};     // --profile-ranks
  // --profile-step-start/--profile-step-end: the iterations that start with this many completed
  // are profiled (Megatron's window: 10 and 12 profile iterations 11 and 12).
  std::int64_t profile_step_start = 10;
  std::int64_t profile_step_end = 12;
  bool profile_gemms = false;                     // --profile-gemms (mgt): BackendOptions::profile_gemms
  std::optional<std::string> profile_timeline;    // --profile-timeline FILE (mgt)
  bool log_params_norm = false;                   // --log-params-norm: "params norm" in the log line
  bool log_num_zeros_in_grad = false;             // --log-num-zeros-in-grad: "num zeros" in the log line
  // --check-weight-hash-across-dp-replicas-interval: the replicas' weights compared before training
  // and after every N-th iteration (train/weight_hash_check.hpp).
  std::optional<std::int64_t> check_weight_hash_interval;
  bool check_for_spiky_loss = false;  // --check-for-spiky-loss (train/spiky_loss_check.hpp)
  std::optional<std::string> metrics_file;        // --metrics-file (mgt): JSON lines
  // TensorBoard event files (train/tensorboard_log.hpp): Megatron's scalars and switches.
  std::optional<std::string> tensorboard_dir;     // --tensorboard-dir
  std::int64_t tensorboard_log_interval = 1;      // --tensorboard-log-interval
  std::int64_t tensorboard_queue_size = 1000;     // --tensorboard-queue-size: events held before a write
  bool log_timers_to_tensorboard = false;         // --log-timers-to-tensorboard
  bool log_learning_rate_to_tensorboard = true;   // older Megatron's --no-log-learning-rate-to-tensorboard
  bool log_loss_scale_to_tensorboard = true;      // --no-log-loss-scale-to-tensorboard clears it
  bool log_validation_ppl_to_tensorboard = false; // --log-validation-ppl-to-tensorboard
  bool log_world_size_to_tensorboard = false;     // --log-world-size-to-tensorboard
};

struct ParallelOptions {
  std::int64_t tensor_model_parallel_size = 1;    // --tensor-model-parallel-size
  std::int64_t pipeline_model_parallel_size = 1;  // --pipeline-model-parallel-size (1F1B)
  // --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers: the layers of the
  // first / last pipeline stage (model/pipeline_stage.hpp); unset: num_layers / PP each.
  std::optional<std::int64_t> decoder_first_pipeline_num_layers;
  std::optional<std::int64_t> decoder_last_pipeline_num_layers;
  // --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split.
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;
  // Megatron's interleaved schedule (train/virtual_pipeline_options.hpp): the two ways to give
  // the model chunks per pipeline rank, and its micro-batch group size (unset: PP).
  std::optional<std::int64_t> num_layers_per_virtual_pipeline_stage;            // --num-layers-per-virtual-pipeline-stage
  std::optional<std::int64_t> num_virtual_stages_per_pipeline_rank;             // --num-virtual-stages-per-pipeline-rank
  std::optional<std::int64_t> microbatch_group_size_per_virtual_pipeline_stage;  // --microbatch-group-size-per-virtual-pipeline-stage
  // Derived by validation, as Megatron's args.virtual_pipeline_model_parallel_size: model chunks
  // per pipeline rank (1: the non-interleaved 1F1B schedule).
  std::int64_t virtual_pipeline_model_parallel_size = 1;
  std::int64_t context_parallel_size = 1;         // --context-parallel-size (ring attention)
  // --cp-comm-type: one for all layers or one per layer; p2p only (model/ring_attention.hpp).
  std::vector<std::string> cp_comm_type = {"p2p"};
  bool sequence_parallel = false;                 // cleared when TP is 1, as Megatron does
  bool use_distributed_optimizer = false;         // same results as the plain optimizer at DP 1
  // Bucket by bucket, as the backward finishes them (train/overlapped_data_parallel.hpp).
  bool overlap_grad_reduce = false;               // --overlap-grad-reduce
  bool overlap_param_gather = false;              // --overlap-param-gather (needs both above)
  bool grad_reduce_in_bf16 = false;               // --grad-reduce-in-bf16 (train/bf16_gradient_copy.hpp)
  // --ddp-bucket-size: elements per gradient bucket under --overlap-grad-reduce; unset:
  // Megatron's max(40000000, 1000000 × data-parallel size).
  std::optional<std::int64_t> ddp_bucket_size;
  // --distributed-backend: nccl (NCCL between GPUs where it can run), gloo or mpi (MPI);
  // dist/transport_choice.hpp decides.
  std::string distributed_backend = "nccl";
  std::int64_t distributed_timeout_minutes = 10;  // --distributed-timeout-minutes
  // --dp-collectives (mgt): over NCCL, where the data-parallel ranks share a machine, the
  // gradients' and weights' collectives on the GPUs' copy engines ("copy-engines") or in NCCL's
  // kernels ("nccl"); dist::CommunicationOptions.
  std::string dp_collectives = "copy-engines";
  // --simulated-nodes (mgt), a testing aid: consecutive blocks of world_size / N ranks count as
  // nodes of their own (dist/node_membership.hpp), so that one machine stands for N.
  std::int64_t simulated_nodes = 1;
  // Derived by validation: world_size / (TP × PP × CP), and the micro-batches per iteration.
  std::int64_t world_size = 1;
  std::int64_t data_parallel_size = 1;
};

struct TrainOptions {
  ModelShapeOptions model;
  OptimizationOptions optim;
  DataOptions data;
  CheckpointOptions checkpoint;
  LoggingOptions logging;
  ParallelOptions parallel;
  Fp8Options fp8;
  MoeOptions moe;  // --num-experts and the --moe-* flags
  std::string device = "auto";  // --device: auto, cpu, cuda or cuda:N (kernels/backend_factory.hpp)
  bool show_help = false;  // --help: print train_options_help() and stop
  bool dry_run = false;    // --dry-run (mgt): estimate parameters and memory, then stop
  PlannerOptions planner;  // --world-size, --planner-gpu, --planner-gpu-memory (mgt): --dry-run's layouts
  // Megatron flags accepted and ignored (core/megatron_compatibility.hpp), for the start-up line.
  std::vector<IgnoredFlagUse> ignored_flags;

  // Valid after validation: iterations to run (sample-based runs: train_samples // gbs, or
  // Megatron's update_train_iters with --rampup-batch-size).
  std::int64_t total_train_iters() const;
  // Valid after validation: gbs / (micro-batch × data-parallel size), with the final global batch
  // size under --rampup-batch-size (evaluation's, as Megatron's evaluate()).
  std::int64_t num_microbatches() const;
  // Valid after validation: the global batch size as consumed samples grow.
  GlobalBatchSizeSchedule global_batch_size_schedule() const;
};

// Parses and validates (validate_train_options with `world_size`, the number of ranks, known
// before parsing from the launcher). Throws mgt::UsageError.
// With --help, returns right away with show_help set and nothing checked.
TrainOptions parse_train_options(int argc, const char* const* argv, int world_size = 1);

// Parses only, for a program that learns the number of ranks from the flags' own
// --distributed-timeout-minutes start: call validate_train_options once it is known. Without
// `report_notes` the notes about the flags (a tokenizer type inferred) are left to another rank.
TrainOptions read_train_options(int argc, const char* const* argv, bool report_notes = true);

// Megatron's validate_args for the supported flags: fills the derived values and throws
// mgt::UsageError naming the flags at fault. Call it once: like Megatron it completes the
// options in place (start/end weight decay, for one, must be unset on entry when constant).
void validate_train_options(TrainOptions& options, int world_size = 1);

// The --help text.
std::string train_options_help();

// The data flags as mgt-index takes them, so training builds (or finds in the cache) exactly
// the indices mgt-index builds for the same flags.
IndexOptions index_options(const TrainOptions& options);

// The pipeline flags as the model's split of the layers takes them.
PipelineSplit pipeline_split(const ParallelOptions& parallel);

}  // namespace mgt
