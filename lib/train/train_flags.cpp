#include "train/train_flags.hpp"

#include <string>

#include "ckpt/checkpoint_read_flags.hpp"
#include "core/compute_flags.hpp"
#include "data/dataset_flags.hpp"
#include "model/model_flags.hpp"
#include "model/moe_flags.hpp"
#include "tokenizer/tokenizer_flags.hpp"

namespace mgt {

// Each entry: the flag, its metavar, the field it sets and its description (the "mgt: " mark,
// "(required)" and "(default: X)" are added from the entry; core/flag_table.hpp). The ranges of
// numbers are a property of the flag's name, shared by every program: core/flag_ranges.cpp.
// The run description records each flag under its name with '_' for '-' unless the entry says
// otherwise. Checks that involve several flags are in train_options_validate.cpp.
namespace {

// --exp-avg-dtype / --exp-avg-sq-dtype: a moment's type under --use-precision-aware-optimizer.
FlagDefinition moment_type_flag(const char* name, std::string& field, const char* moment) {
  const std::string scaled = "moments stored with Transformer Engine's per-tensor scales (fp16, fp8) are not "
                             "implemented; bf16 halves their memory without scales";
  return store(name, "T", field,
               std::string("fp32 or bf16: Adam's ") + moment + " moment's type with --use-precision-aware-optimizer")
      .choices({"fp32", "bf16"})
      .refused_because("fp16", scaled)
      .refused_because("fp8", scaled);
}

}  // namespace

// clang-format off
std::vector<FlagDefinition> train_flags(TrainOptions& o) {
  ModelShapeOptions& m = o.model;
  OptimizationOptions& t = o.optim;
  DataOptions& d = o.data;
  TokenizerOptions& tok = o.data.tokenizer;
  CheckpointOptions& c = o.checkpoint;
  LoggingOptions& l = o.logging;
  ParallelOptions& p = o.parallel;
  return flag_groups({
    {"model", model_flags(m)},
    {"training", joined_flags({{
      micro_batch_size_flag(t.micro_batch_size).required(),
      global_batch_size_flag(t.global_batch_size).default_text("micro-batch x data-parallel size"),
      train_iters_flag(t.train_iters),
      train_samples_flag(t.train_samples),
      rampup_batch_size_flag(t.rampup_batch_size),
      store_list("iterations-to-skip", "N...", t.iterations_to_skip, "Skip the steps that start after N completed iterations (Megatron's count: N skips the iteration logged as N + 1): their micro-batches are read and dropped and count as consumed and as skipped samples; no update, no learning-rate step"),
      store("lr", "F", t.lr, "Peak learning rate").required(),
      store("min-lr", "F", t.min_lr, "Learning rate at the end of the decay"),
      store("decoupled-lr", "F", t.decoupled_lr, "Peak learning rate of the word embedding and output layer").default_text("--lr"),
      store("decoupled-min-lr", "F", t.decoupled_min_lr, "Their learning rate at the end of the decay").default_text("--min-lr"),
      store("lr-decay-style", "S", t.lr_decay_style, "constant, linear, cosine, inverse-square-root or WSD")
          .choices({"constant", "linear", "cosine", "inverse-square-root", "WSD"}),
      store("lr-warmup-iters", "N", t.lr_warmup_iters, "Warm-up iterations"),
      store("lr-warmup-fraction", "F", t.lr_warmup_fraction, "Warm-up as a fraction of the decay"),
      store("lr-warmup-samples", "N", t.lr_warmup_samples, "Warm-up samples"),
      store("lr-warmup-init", "F", t.lr_warmup_init, "Learning rate at the start of warm-up"),
      store("lr-decay-iters", "N", t.lr_decay_iters, "Decay iterations").default_text("--train-iters"),
      store("lr-decay-samples", "N", t.lr_decay_samples, "Decay samples").default_text("--train-samples"),
      store("lr-wsd-decay-style", "S", t.lr_wsd_decay_style, "WSD annealing: exponential, linear, cosine or minus_sqrt")
          .choices({"exponential", "linear", "cosine", "minus_sqrt"}),
      store("lr-wsd-decay-iters", "N", t.lr_wsd_decay_iters, "WSD annealing iterations"),
      store("lr-wsd-decay-samples", "N", t.lr_wsd_decay_samples, "WSD annealing samples"),
      store_true("override-opt_param-scheduler", t.override_opt_param_scheduler, "On --load, keep the schedule of the flags"),
      store_true("use-checkpoint-opt_param-scheduler", t.use_checkpoint_opt_param_scheduler, "On --load, take the schedule from the checkpoint"),
      store("weight-decay", "F", t.weight_decay, "Weight decay"),
      store("start-weight-decay", "F", t.start_weight_decay, "Initial weight decay (non-constant increment styles)"),
      store("end-weight-decay", "F", t.end_weight_decay, "Final weight decay (non-constant increment styles)"),
      store("weight-decay-incr-style", "S", t.weight_decay_incr_style, "constant, linear or cosine").choices({"constant", "linear", "cosine"}),
      store_true("calculate-per-token-loss", t.calculate_per_token_loss, "Normalise the loss by the global batch's tokens, not per micro-batch"),
      store("clip-grad", "F", t.clip_grad, "Global gradient-norm clip, 0 for none"),
      store("adam-beta1", "F", t.adam_beta1, "Adam beta1"),
      store("adam-beta2", "F", t.adam_beta2, "Adam beta2"),
      store("adam-eps", "F", t.adam_eps, "Adam epsilon"),
      store("optimizer", "NAME", t.optimizer, "adam (AdamW), the only one").choices({"adam"}, {"sgd"}),
      store_true("use-precision-aware-optimizer", t.use_precision_aware_optimizer,
                 "Keep Adam's moments in the types of --exp-avg-dtype and --exp-avg-sq-dtype (Transformer Engine's "
                 "FusedAdam: each step reads them into fp32 and stores them rounded); needs --use-distributed-optimizer"),
      store("main-grads-dtype", "T", t.main_grads_dtype, "fp32, the only one: the gradients' type for the optimizer with --use-precision-aware-optimizer")
          .choices({"fp32"})
          .refused_because("bf16", "mgt accumulates and keeps the gradients in fp32 (--grad-reduce-in-bf16 reduces "
                                   "bf16 copies of them)"),
      store("main-params-dtype", "T", t.main_params_dtype, "fp32, the only one: the master weights' type with --use-precision-aware-optimizer")
          .choices({"fp32"})
          .refused_because("fp16", "fp16 master weights with Transformer Engine's per-tensor scales are not "
                                   "implemented; mgt's master weights are fp32"),
      moment_type_flag("exp-avg-dtype", t.exp_avg_dtype, "first"),
      moment_type_flag("exp-avg-sq-dtype", t.exp_avg_sq_dtype, "second"),
      seed_flag(t.seed),
    }, {
      device_flag(o.device)
          .not_recorded("where the run computes, not what: a checkpoint resumes on any device"),
    }, precision_flags(t.precision), {
      store("loss-scale", "S", t.loss_scale, "Constant loss scale instead of dynamic scaling").default_text("dynamic under --fp16"),
      store("initial-loss-scale", "S", t.initial_loss_scale, "Initial dynamic loss scale"),
      store("min-loss-scale", "S", t.min_loss_scale, "Minimum dynamic loss scale"),
      store("loss-scale-window", "N", t.loss_scale_window, "Good iterations before the dynamic loss scale doubles"),
      store("hysteresis", "N", t.hysteresis, "Overflow iterations before the dynamic loss scale halves"),
      store_true("deterministic-mode", t.deterministic_mode, "Deterministic kernels only: reruns and resumes give the same bits on a GPU too, several times slower there"),
    }})},
    {"fp8", fp8_flags(o.fp8)},
    {"data", joined_flags({
      dataset_source_flags(d, "Datasets, optionally weighted: 'W1 PREFIX1 W2 PREFIX2 ...' (required, or --data-args-path, the per-split paths or --mock-data)"), {
      store_true("mock-data", d.mock_data, "Megatron's synthetic data instead of datasets (required without a data path)"),
      store("dataloader-type", "TYPE", d.dataloader_type, "single (each split in order) or cyclic (each epoch of a split in a random order drawn from the epoch's number, epoch after epoch, as Megatron's MegatronPretrainingRandomSampler reads it)").choices({"single", "cyclic"}, {"external"}),
      store_false("no-data-sharding", d.data_sharding, "With --dataloader-type cyclic: one random order over the whole split dealt to the data-parallel ranks in turn, instead of each rank's own contiguous share in an order of its own"),
    }, tokenizer_flags(tok, TokenizerFlagsRole::kNamesTokenizer),
      sample_flags({d.eod_mask_loss, d.reset_position_ids, d.reset_attention_mask}),
    })},
    {"checkpointing", {
      store("save", "DIR", c.save, "Checkpoint directory to write"),
      store("save-interval", "N", c.save_interval, "Iterations between checkpoints (needed with --save)"),
      store("persistent-save-interval", "N", c.save_interval, "Same as --save-interval")
          .not_recorded("Megatron's other name of --save-interval, recorded as save_interval"),
      store("load", "DIR", c.load, "Checkpoint directory to resume from"),
      ckpt_step_flag(c.ckpt_step),
      store_true("use-checkpoint-args", c.use_checkpoint_args, "Take the model's flags from the arguments --load's checkpoint recorded, as Megatron: the sizes where the command line leaves them out, the architecture's kinds (norms, positions, biases, SwiGLU, query groups, dropouts, MoE layer, tokenizer type and model) always; each printed as 'Setting NAME to VALUE from checkpoint'"),
      store_false("no-use-tokenizer-model-from-checkpoint-args", c.use_tokenizer_model_from_checkpoint_args, "With --use-checkpoint-args, keep the command line's --tokenizer-model")
          .key("use_tokenizer_model_from_checkpoint_args"),
      store_true("use-mp-args-from-checkpoint-args", c.use_mp_args_from_checkpoint_args, "With --use-checkpoint-args, take the parallel layout from the checkpoint too: the tensor-, pipeline- and expert-parallel sizes (the layers per virtual stage where not given)"),
      store_true("exit-on-missing-checkpoint", c.exit_on_missing_checkpoint, "With --load: stop with an error when the directory holds no checkpoint, instead of training from random weights"),
      store_true("no-save-optim", c.no_save_optim, "Do not save the optimizer state"),
      store_true("no-save-rng", c.no_save_rng, "Do not save the random state"),
      store_true("no-load-optim", c.no_load_optim, "Do not load the optimizer state"),
      store_true("no-load-rng", c.no_load_rng, "Do not load the random state"),
      store_true("finetune", c.finetune, "Load weights only and start at iteration 0"),
      store_true("async-save", c.async_save, "Copy the state to host memory at the save iteration and write the files in the background while training goes on; the tracker file moves once every rank has written"),
      store("async-save-delay-ms", "N", c.async_save_delay_ms, "A testing aid: with --async-save, the background writer waits N ms before closing each file, so that tests can interrupt a save mid-write")
          .not_recorded("a testing aid; it does not change what is saved"),
    }},
    {"logging", {
      store("log-interval", "N", l.log_interval, "Iterations between log lines"),
      eval_interval_flag(l.eval_interval),
      eval_iters_flag(l.eval_iters),
      store_true("skip-train", l.skip_train, "Train nothing: evaluate the model --load gives (else the initial one) on the validation and test sets and exit; nothing is saved, nothing written to TensorBoard"),
      store("exit-interval", "N", l.exit_interval, "Exit (after saving) when the iteration is a multiple of N"),
      store("exit-duration-in-mins", "N", l.exit_duration_in_mins, "Exit (after saving) once N minutes have passed"),
      store_true("exit-signal-handler", l.exit_signal_handler, "On the exit signal, save and exit after the current iteration"),
      store("exit-signal", "SIG", l.exit_signal, "the signal for --exit-signal-handler: SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2 or SIGXCPU")
          .choices({"SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGXCPU"}),
      store_true("log-throughput", l.log_throughput, "Log TFLOP/s per GPU"),
      store_true("log-progress", l.log_progress, "With --save: append a line to SAVE/progress.txt when the job starts and after each checkpoint, with the job's and the cumulative TFLOP/s per GPU, the FLOPs and the tokens so far (Megatron's progress log)"),
      store_true("profile", l.profile, "Print the time per backend operation of the profiled iterations at the end of the run (GPU time on the CUDA backend, host time on the CPU)"),
      store_list("profile-ranks", "RANK...", l.profile_ranks, "The ranks that --profile profiles"),
      store("profile-step-start", "N", l.profile_step_start, "--profile starts counting after N iterations"),
      store("profile-step-end", "N", l.profile_step_end, "--profile stops counting after N iterations"),
      store_true("profile-gemms", l.profile_gemms, "With --profile, the profiled ranks print each GEMM shape the CUDA backend plans and its timed algorithm choice"),
      store("profile-timeline", "FILE", l.profile_timeline, "With --profile, also write every counted operation to FILE as CSV (FILE.rankN with several --profile-ranks)"),
      store_true("log-params-norm", l.log_params_norm, "Log the L2 norm of the parameters"),
      store_true("log-num-zeros-in-grad", l.log_num_zeros_in_grad, "Log the number of zeros in the gradient"),
      store_true("check-for-spiky-loss", l.check_for_spiky_loss, "Stop when a micro-batch's loss (its sum over the tokens) is at least 10 times the largest of the first 100, training and evaluation alike (Megatron's spiky-loss check)"),
      store("check-weight-hash-across-dp-replicas-interval", "N", l.check_weight_hash_interval, "Compare the data-parallel replicas' weights, by a hash of each tensor, before training and after every N-th iteration; stop naming the tensors that differ"),
      store("metrics-file", "FILE", l.metrics_file, "append one JSON object per log line and validation"),
      store("tensorboard-dir", "DIR", l.tensorboard_dir, "Write TensorBoard event files (scalars) to DIR"),
      store("tensorboard-log-interval", "N", l.tensorboard_log_interval, "Iterations between TensorBoard training scalars"),
      store("tensorboard-queue-size", "N", l.tensorboard_queue_size, "TensorBoard events buffered before a write; they are also written at each --log-interval"),
      store_true("log-timers-to-tensorboard", l.log_timers_to_tensorboard, "Write iteration-time (and throughput with --log-throughput) to TensorBoard"),
      store_false("no-log-learning-rate-to-tensorboard", l.log_learning_rate_to_tensorboard, "Do not write learning-rate to TensorBoard (older Megatron's flag)")
          .key("log_learning_rate_to_tensorboard").megatron_flag(),
      store_false("no-log-loss-scale-to-tensorboard", l.log_loss_scale_to_tensorboard, "Do not write loss-scale to TensorBoard")
          .key("log_loss_scale_to_tensorboard"),
      store_true("log-validation-ppl-to-tensorboard", l.log_validation_ppl_to_tensorboard, "Write validation perplexities to TensorBoard"),
      store_true("log-world-size-to-tensorboard", l.log_world_size_to_tensorboard, "Write world-size to TensorBoard"),
    }},
    {"parallelism", {
      store("tensor-model-parallel-size", "N", p.tensor_model_parallel_size, "Tensor-parallel size: ranks that split each layer"),
      store("pipeline-model-parallel-size", "N", p.pipeline_model_parallel_size, "Pipeline-parallel size: stages of consecutive layers, 1F1B schedule"),
      store("decoder-first-pipeline-num-layers", "N", p.decoder_first_pipeline_num_layers, "Layers of the first pipeline stage").default_text("num-layers / PP"),
      store("decoder-last-pipeline-num-layers", "N", p.decoder_last_pipeline_num_layers, "Layers of the last pipeline stage").default_text("num-layers / PP"),
      store_true("account-for-embedding-in-pipeline-split", p.account_for_embedding_in_pipeline_split, "Count the input embedding as a layer when splitting the layers over the pipeline stages: the first stage builds one transformer layer fewer (num-layers + 1 divisible by PP)"),
      store_true("account-for-loss-in-pipeline-split", p.account_for_loss_in_pipeline_split, "Count the output layer and loss as a layer when splitting the layers over the pipeline stages: the last stage builds one transformer layer fewer"),
      store("num-layers-per-virtual-pipeline-stage", "N", p.num_layers_per_virtual_pipeline_stage, "Number of layers per virtual pipeline stage: the interleaved 1F1B schedule, each pipeline rank holding (num-layers / PP) / N model chunks"),
      store("num-virtual-stages-per-pipeline-rank", "N", p.num_virtual_stages_per_pipeline_rank, "Number of virtual pipeline stages (model chunks) per pipeline rank: the interleaved 1F1B schedule"),
      store("microbatch-group-size-per-virtual-pipeline-stage", "N", p.microbatch_group_size_per_virtual_pipeline_stage, "Micro-batches run at a time on one virtual stage by the interleaved schedule").default_text("pipeline-model-parallel-size"),
      store("context-parallel-size", "N", p.context_parallel_size, "Context-parallel size: ranks that each hold 2 of 2N chunks of every sequence, attention over a ring"),
      store_list("cp-comm-type", "TYPE...", p.cp_comm_type, "Communication of context-parallel attention, one type for all layers: p2p (the ring) or a2a (all-to-all over the heads); allgather and a2a+p2p are refused"),
      store_true("sequence-parallel", p.sequence_parallel, "Sequence parallelism (needs tensor parallelism)"),
      store_true("use-distributed-optimizer", p.use_distributed_optimizer, "Shard the optimizer state over data-parallel ranks"),
      store_true("overlap-grad-reduce", p.overlap_grad_reduce, "Reduce the gradients over the data-parallel ranks bucket by bucket during the last backward"),
      store_true("overlap-param-gather", p.overlap_param_gather, "All-gather the updated weights bucket by bucket, each waited for at its first use in the next forward (needs --use-distributed-optimizer and --overlap-grad-reduce)"),
      store_true("grad-reduce-in-bf16", p.grad_reduce_in_bf16, "Reduce the gradients over the data-parallel ranks in bf16 (bf16 copies of the fp32 gradients, which accumulate the micro-batches in fp32)"),
      store("ddp-bucket-size", "N", p.ddp_bucket_size, "Elements per gradient bucket under --overlap-grad-reduce").default_text("max(40000000, 1000000 x data-parallel size)"),
      store("distributed-backend", "B", p.distributed_backend, "nccl (NCCL between GPUs, MPI for CPU ranks and ranks sharing a GPU) or gloo/mpi (MPI, device buffers staged through host memory)"),
      store("distributed-timeout-minutes", "N", p.distributed_timeout_minutes, "End the job when a communication waits longer than N minutes"),
      store("dp-collectives", "WHERE", p.dp_collectives, "Where the data-parallel collectives of GPUs on one machine run over NCCL: copy-engines (leaving the multiprocessors to the compute) or nccl (NCCL's kernels)")
          .choices({"copy-engines", "nccl"}),
      store("simulated-nodes", "N", p.simulated_nodes, "A testing aid: consecutive blocks of world-size / N ranks count as separate nodes besides the nodes the launcher reports, so that one machine stands for N (the copy-engine collectives inside a block, NCCL between blocks); N must divide the world size"),
    }},
    {"moe", moe_flags(o.moe)},
    {"other", {
      store_true("dry-run", o.dry_run, "print the parameter count and the memory per rank (JSON on stdout, a summary on stderr) and exit, reading no data; with --world-size, or under a launcher on GPUs, also the layouts that fit, best first")
          .not_recorded("a dry run stops before training and writes no checkpoint"),
      store("world-size", "N", o.planner.world_size, "with --dry-run and no launcher, plan layouts for N GPUs (under a launcher its ranks are planned for): the fitting layouts, best estimated step time first; with --device cpu, check the flags for N CPU ranks")
          .not_recorded("a dry run stops before training and writes no checkpoint"),
      store("planner-gpu", "KIND", o.planner.gpu, "the GPU the --dry-run layout planner plans for, h100 (80GB) or h200 (141GB): its cost constants and memory").choices({"h100", "h200"})
          .default_text("the visible GPU; h100 without one")
          .not_recorded("a dry run stops before training and writes no checkpoint"),
      store("planner-gpu-memory", "GiB", o.planner.gpu_memory_gib, "each GPU's memory for the --dry-run layout planner, in GiB (90% of it is planned for)")
          .default_text("the visible GPU's, or --planner-gpu's")
          .not_recorded("a dry run stops before training and writes no checkpoint"),
    }},
  });
}
// clang-format on

}  // namespace mgt
