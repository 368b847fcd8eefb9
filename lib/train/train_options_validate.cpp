// Megatron's validate_args (megatron/training/arguments.py) for the flags mgt-train supports,
// plus the checks Megatron leaves to later asserts (OptimizerParamScheduler, TransformerConfig),
// moved up front so that every mistake is a usage error naming its flags. What concerns one flag
// alone (required, choices, ranges) is declared in its definition (train/train_flags.cpp) and
// checked first; what follows relates flags to each other.
#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "core/log.hpp"
#include "data/per_split_data_args.hpp"
#include "dist/transport_choice.hpp"
#include "model/context_parallel_split.hpp"
#include "model/head_scatter_attention.hpp"
#include "model/pipeline_stage.hpp"
#include "model/recompute_plan.hpp"
#include "train/moe_options_validate.hpp"
#include "train/train_flags.hpp"
#include "train/train_options.hpp"
#include "train/virtual_pipeline_options.hpp"

namespace mgt {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

// Megatron's OptimizerConfig.__post_init__: the optimizer's types other than fp32 only with the
// precision-aware optimizer, and that only with the distributed optimizer.
void validate_precision_aware_optimizer(const OptimizationOptions& o, const ParallelOptions& p) {
  if (o.use_precision_aware_optimizer) {
    if (!p.use_distributed_optimizer)
      throw UsageError("--use-precision-aware-optimizer needs --use-distributed-optimizer (Megatron: only supported "
                       "with distributed optimizer)");
    return;
  }
  for (const auto& [flag, type] : {std::pair<const char*, const std::string&>{"--main-grads-dtype", o.main_grads_dtype},
                                   {"--main-params-dtype", o.main_params_dtype},
                                   {"--exp-avg-dtype", o.exp_avg_dtype},
                                   {"--exp-avg-sq-dtype", o.exp_avg_sq_dtype}})
    if (type != "fp32")
      throw UsageError(std::string(flag) + " " + type + " needs --use-precision-aware-optimizer (Megatron: only fp32 "
                       "when not using precision-aware optimizer)");
}

void validate_parallel(ParallelOptions& p, int world_size) {
  for (const std::string& type : p.cp_comm_type) {
    if (type == "allgather" || type == "a2a+p2p")
      throw UsageError("--cp-comm-type " + type + " is not implemented (p2p, the ring, and a2a, all-to-all)");
    if (type != "p2p" && type != "a2a")
      throw UsageError("--cp-comm-type: expected p2p, a2a, allgather or a2a+p2p, got '" + type + "'");
    if (type != p.cp_comm_type.front())
      throw UsageError("--cp-comm-type: one type per layer is not implemented (give one type for all layers)");
  }
  if (world_size <= 0) throw Error("world size must be positive");
  const std::int64_t model_size =
      p.tensor_model_parallel_size * p.pipeline_model_parallel_size * p.context_parallel_size;
  if (world_size % model_size != 0)
    throw UsageError("world size (" + str(world_size) + ") is not divisible by tensor x pipeline x "
                     "context parallel size (" + str(model_size) + ")");
  p.world_size = world_size;
  p.data_parallel_size = world_size / model_size;
  if (p.simulated_nodes < 1 || world_size % p.simulated_nodes != 0)
    throw UsageError("--simulated-nodes " + str(p.simulated_nodes) + ": expected a positive divisor of the world size (" +
                     str(world_size) + ")");
  dist::parse_distributed_backend(p.distributed_backend);
  // Megatron's validate_args.
  if (p.overlap_param_gather && !p.use_distributed_optimizer)
    throw UsageError("--overlap-param-gather needs --use-distributed-optimizer");
  if (p.overlap_param_gather && !p.overlap_grad_reduce)
    throw UsageError("--overlap-param-gather needs --overlap-grad-reduce");
  if (p.tensor_model_parallel_size == 1 && p.sequence_parallel) {
    log::warn("Disabling sequence parallelism because tensor model parallelism is disabled");
    p.sequence_parallel = false;
  }
}

void validate_batch(OptimizationOptions& o, const ParallelOptions& p) {
  const std::int64_t micro = *o.micro_batch_size;
  if (!o.global_batch_size) {
    o.global_batch_size = micro * p.data_parallel_size;
    log::info("setting global batch size to " + str(*o.global_batch_size));
  }
  if (*o.global_batch_size % (micro * p.data_parallel_size) != 0)
    throw UsageError("global batch size (" + str(*o.global_batch_size) + ") is not divisible by "
                     "micro batch size (" + str(micro) + ") times data parallel size (" +
                     str(p.data_parallel_size) + ")");
}

// Megatron's ramp-up calculator asserts at each iteration that the batch size it reaches is a
// multiple of micro-batch × data-parallel size; here every size the run will reach is checked
// before it starts.
void validate_rampup(const OptimizationOptions& o, const ParallelOptions& p) {
  if (!o.rampup_batch_size) return;
  if (o.train_iters)
    throw UsageError("--rampup-batch-size needs --train-samples (Megatron: 'expected no batch-size rampup for "
                     "iteration-based training')");
  const GlobalBatchSizeSchedule schedule(*o.global_batch_size, o.rampup_batch_size);
  const std::int64_t unit = *o.micro_batch_size * p.data_parallel_size;
  for (std::int64_t size : schedule.batch_sizes_used(schedule.train_iters(*o.train_samples)))
    if (size % unit != 0)
      throw UsageError("--rampup-batch-size: the global batch size " + str(size) + " that the ramp-up reaches is not "
                       "divisible by micro batch size (" + str(*o.micro_batch_size) + ") times data parallel size (" +
                       str(p.data_parallel_size) + ")");
}

// Iteration-based and sample-based runs each take their own family of schedule flags.
void validate_run_length(const OptimizationOptions& o) {
  if (o.train_iters && o.train_samples)
    throw UsageError("--train-iters and --train-samples are mutually exclusive");
  if (!o.train_iters && !o.train_samples) throw UsageError("--train-iters or --train-samples is required");
  if (o.train_iters) {
    if (o.lr_decay_samples) throw UsageError("--lr-decay-samples needs --train-samples (use --lr-decay-iters)");
    if (o.lr_warmup_samples != 0)
      throw UsageError("--lr-warmup-samples needs --train-samples (use --lr-warmup-iters)");
    if (o.lr_wsd_decay_samples)
      throw UsageError("--lr-wsd-decay-samples needs --train-samples (use --lr-wsd-decay-iters)");
    if (o.lr_warmup_fraction && o.lr_warmup_iters != 0)
      throw UsageError("can only specify one of --lr-warmup-fraction and --lr-warmup-iters");
  } else {
    if (o.lr_decay_iters) throw UsageError("--lr-decay-iters needs --train-iters (use --lr-decay-samples)");
    if (o.lr_warmup_iters != 0)
      throw UsageError("--lr-warmup-iters needs --train-iters (use --lr-warmup-samples)");
    if (o.lr_wsd_decay_iters)
      throw UsageError("--lr-wsd-decay-iters needs --train-iters (use --lr-wsd-decay-samples)");
    if (o.lr_warmup_fraction && o.lr_warmup_samples != 0)
      throw UsageError("can only specify one of --lr-warmup-fraction and --lr-warmup-samples");
    // Megatron's train_iters = train_samples // global_batch_size would be 0: a run that trains
    // nothing and exits 0, as --train-iters 0 is refused.
    if (o.global_batch_size && !o.rampup_batch_size && *o.train_samples < *o.global_batch_size)
      throw UsageError("--train-samples " + std::to_string(*o.train_samples) + " is less than one global batch (" +
                       "--global-batch-size " + std::to_string(*o.global_batch_size) + "): no iteration would run");
  }
}

// What OptimizerParamScheduler's constructor asserts, said in terms of flags.
void validate_schedule(OptimizationOptions& o) {
  if (!(o.min_lr <= *o.lr)) throw UsageError("--min-lr must not exceed --lr");
  if (!(o.lr_warmup_init <= *o.lr)) throw UsageError("--lr-warmup-init must not exceed --lr");
  // Megatron ignores --decoupled-min-lr without --decoupled-lr (_update_min_and_max_lr_in_param_groups);
  // refused here rather than ignored silently.
  if (o.decoupled_min_lr && !o.decoupled_lr) throw UsageError("--decoupled-min-lr needs --decoupled-lr");
  if (o.decoupled_lr) {
    const double decoupled_min = o.decoupled_min_lr.value_or(o.min_lr);
    if (!(decoupled_min <= *o.decoupled_lr))
      throw UsageError(std::string(o.decoupled_min_lr ? "--decoupled-min-lr" : "--min-lr (the default of "
                                                                                "--decoupled-min-lr)") +
                       " must not exceed --decoupled-lr");
  }
  if (o.lr_decay_style == "WSD" && !o.lr_wsd_decay_iters && !o.lr_wsd_decay_samples)
    throw UsageError("--lr-decay-style WSD needs --lr-wsd-decay-iters (or --lr-wsd-decay-samples)");

  const std::int64_t gbs = *o.global_batch_size;
  const std::int64_t decay = o.train_iters ? o.lr_decay_iters.value_or(*o.train_iters) * gbs
                                           : o.lr_decay_samples.value_or(*o.train_samples);
  const double warmup = o.lr_warmup_fraction ? *o.lr_warmup_fraction * static_cast<double>(decay)
                        : o.train_iters      ? static_cast<double>(o.lr_warmup_iters * gbs)
                                             : static_cast<double>(o.lr_warmup_samples);
  if (!(warmup < static_cast<double>(decay)))
    throw UsageError("the learning-rate warm-up must be shorter than the decay (--lr-warmup-* against "
                     "--lr-decay-iters/--lr-decay-samples, which default to the run length)");

  if (o.weight_decay_incr_style == "constant") {
    if (o.start_weight_decay || o.end_weight_decay)
      throw UsageError("--start-weight-decay and --end-weight-decay need --weight-decay-incr-style "
                       "linear or cosine (constant uses --weight-decay)");
    o.start_weight_decay = o.weight_decay;
    o.end_weight_decay = o.weight_decay;
  } else if (!o.start_weight_decay || !o.end_weight_decay) {
    throw UsageError("--weight-decay-incr-style " + o.weight_decay_incr_style +
                     " needs --start-weight-decay and --end-weight-decay");
  }
  if (!(*o.end_weight_decay >= *o.start_weight_decay))
    throw UsageError("--end-weight-decay must not be less than --start-weight-decay");
  if (o.override_opt_param_scheduler && o.use_checkpoint_opt_param_scheduler)
    throw UsageError("--override-opt_param-scheduler and --use-checkpoint-opt_param-scheduler are "
                     "mutually exclusive");
}

void validate_recompute_modules(const ModelShapeOptions& m);

void validate_model(ModelShapeOptions& m) {
  const std::int64_t layers = *m.num_layers;
  const std::int64_t hidden = *m.hidden_size;
  const std::int64_t heads = *m.num_attention_heads;
  const std::int64_t max_positions = *m.max_position_embeddings;
  const std::int64_t seq = *m.seq_length;
  if (m.swiglu && m.openai_gelu) throw UsageError("--swiglu and --openai-gelu are mutually exclusive");
  // core_transformer_config_from_args asserts the first; TransformerConfig raises the second
  // (Megatron fuses only a GELU or SwiGLU with the bias, and its bias-GELU fusion is on by default
  // while the linears have biases).
  if (m.squared_relu && m.swiglu) throw UsageError("--squared-relu and --swiglu are mutually exclusive");
  if (m.squared_relu && m.bias_gelu_fusion && m.add_bias_linear)
    throw UsageError("--squared-relu: when bias_activation_fusion is True, activation function should be either "
                     "gelu or swiglu (Megatron's TransformerConfig): give --no-bias-gelu-fusion or "
                     "--disable-bias-linear");
  if (!m.ffn_hidden_size)
    m.ffn_hidden_size = m.swiglu ? static_cast<std::int64_t>((4.0 * static_cast<double>(hidden) * 2.0 / 3.0) / 64.0) * 64
                                 : 4 * hidden;
  if (!m.kv_channels) {
    if (hidden % heads != 0)
      throw UsageError("--hidden-size (" + str(hidden) + ") must be divisible by --num-attention-heads (" +
                       str(heads) + "), or give --kv-channels");
    m.kv_channels = hidden / heads;
  }
  if (m.group_query_attention) {
    if (heads % m.num_query_groups != 0)
      throw UsageError("--num-attention-heads (" + str(heads) + ") must be divisible by --num-query-groups (" +
                       str(m.num_query_groups) + ")");
  }
  if (seq > max_positions)
    throw UsageError("max_position_embeddings (" + str(max_positions) + ") must be greater than or equal to "
                     "seq_length (" + str(seq) + ")");
  // Megatron's validate_args sets rope for its deprecated switch before any check reads the type.
  if (m.use_rotary_position_embeddings) m.position_embedding_type = "rope";
  if (m.use_rope_scaling && m.position_embedding_type != "rope")
    throw UsageError("--use-rope-scaling scales rotary frequencies: it needs --position-embedding-type rope");

  // Megatron (arguments.py validate_args) deprecated --no-position-embedding for
  // --position-embedding-type and accepts it where the two agree: a rotary model has no learned
  // position table.
  if (!m.add_position_embedding && m.position_embedding_type != "rope")
    throw UsageError("--no-position-embedding is deprecated, use --position-embedding-type (Megatron accepts it "
                     "only with --position-embedding-type rope)");

  if (m.recompute_activations) m.recompute_granularity = "selective";
  const bool full = m.recompute_granularity == "full";
  // Without a granularity Megatron recomputes nothing and ignores the method and the layer count
  // (TransformerConfig checks them only when recompute_granularity is set); with selective it
  // refuses them (validate_args, TransformerConfig.__post_init__).
  if (!m.recompute_granularity && (m.recompute_method || m.recompute_num_layers))
    log::info(std::string(m.recompute_method ? "--recompute-method" : "--recompute-num-layers") +
              " has no effect without --recompute-granularity full: nothing is recomputed (as in Megatron)");
  const std::string old_checkpointing = "; for the old --checkpoint-activations with --activations-checkpoint-method, "
                                        "give --recompute-granularity full";
  if (m.recompute_granularity == "selective" && m.recompute_method)
    throw UsageError("--recompute-method applies to --recompute-granularity full, not selective (Megatron: recompute "
                     "method is not yet supported for selective recomputing granularity)" + old_checkpointing);
  if (m.recompute_granularity == "selective" && m.recompute_num_layers)
    throw UsageError("--recompute-num-layers applies to --recompute-granularity full, not selective" +
                     old_checkpointing);
  if (full) {
    if (!m.recompute_method) throw UsageError("--recompute-granularity full needs --recompute-method");
    if (!m.recompute_num_layers) throw UsageError("--recompute-granularity full needs --recompute-num-layers");
    if (*m.recompute_num_layers < 1 || *m.recompute_num_layers > layers)
      throw UsageError("--recompute-num-layers must be between 1 and --num-layers");
  }
  validate_recompute_modules(m);
}

// Megatron (TransformerConfig.__post_init__) reads --recompute-modules under selective granularity
// only, and refuses names outside its list.
void validate_recompute_modules(const ModelShapeOptions& m) {
  if (!m.recompute_modules) return;
  if (m.recompute_granularity != "selective") {
    log::info("--recompute-modules has no effect without --recompute-granularity selective (as in Megatron)");
    return;
  }
  for (const std::string& module : *m.recompute_modules) {
    if (module == "core_attn" || module == "layernorm" || module == "mlp" || module == "moe_act" || module == "moe")
      continue;
    if (module == "mla_up_proj")
      throw UsageError("--recompute-modules mla_up_proj: only with multi-latent attention, which mgt does not have "
                       "(Megatron refuses it likewise without it)");
    throw UsageError("--recompute-modules: invalid choice '" + module +
                     "' (Megatron's are core_attn, moe_act, layernorm, mla_up_proj, mlp and moe)");
  }
}

// --recompute-method uniform checkpoints whole groups of --recompute-num-layers layers in each
// stage (recompute_plan.hpp).
void validate_recompute_groups(const ModelShapeOptions& m, const ParallelOptions& p) {
  if (m.recompute_granularity != "full" || !m.recompute_method || !m.recompute_num_layers) return;
  const std::vector<PipelineStage> stages = pipeline_stages(*m.num_layers, pipeline_split(p));
  GptConfig c;
  c.recompute_granularity = RecomputeGranularity::kFull;
  c.recompute_method = parse_recompute_method(*m.recompute_method);
  c.recompute_num_layers = *m.recompute_num_layers;
  for (const PipelineStage& stage : stages) static_cast<void>(RecomputePlan(c, stage.layers_of(*m.num_layers), true));
}

// What Megatron's TransformerConfig and tensor-parallel layers assert (num_attention_heads and
// num_query_groups multiples of tensor_model_parallel_size, megatron/core/utils.py divide() of
// ffn_hidden_size, the sequence split of scatter_to_sequence_parallel_region), as flags.
void validate_tensor_parallel(const ModelShapeOptions& m, const ParallelOptions& p) {
  const std::int64_t tp = p.tensor_model_parallel_size;
  if (tp == 1) return;
  const std::string by = " must be divisible by --tensor-model-parallel-size (" + str(tp) + ")";
  if (*m.num_attention_heads % tp != 0)
    throw UsageError("--num-attention-heads (" + str(*m.num_attention_heads) + ")" + by);
  if (m.group_query_attention && m.num_query_groups % tp != 0)
    throw UsageError("--num-query-groups (" + str(m.num_query_groups) + ")" + by);
  if (*m.ffn_hidden_size % tp != 0) throw UsageError("--ffn-hidden-size (" + str(*m.ffn_hidden_size) + ")" + by);
  if (p.sequence_parallel && *m.seq_length % tp != 0)
    throw UsageError("--sequence-parallel: --seq-length (" + str(*m.seq_length) + ")" + by);
}

// Megatron's validate_args for context parallelism: 'seq-length should be a multiple of 2 *
// context-parallel-size'. Under sequence parallelism each context-parallel rank's s/cp tokens
// are split again over the tensor-parallel ranks.
void validate_context_parallel(const ModelShapeOptions& m, const ParallelOptions& p) {
  const std::int64_t cp = p.context_parallel_size;
  if (cp == 1) return;
  check_context_parallel_sequence(*m.seq_length, cp);
  const std::int64_t local = *m.seq_length / cp;
  if (p.sequence_parallel && local % p.tensor_model_parallel_size != 0)
    throw UsageError("--sequence-parallel: --seq-length / --context-parallel-size (" + str(local) +
                     ") must be divisible by --tensor-model-parallel-size (" + str(p.tensor_model_parallel_size) + ")");
  if (parse_cp_comm_types(p.cp_comm_type) == CpCommType::kA2a && m.num_attention_heads) {
    const std::string why = HeadScatterAttention::unsupported(*m.num_attention_heads / p.tensor_model_parallel_size,
                                                              m.query_groups() / p.tensor_model_parallel_size, cp);
    if (!why.empty()) throw UsageError("--cp-comm-type a2a: " + why);
  }
}

void validate_data(DataOptions& d) {
  read_per_split_data_args(d);
  const bool whole = !d.data_path.empty() || d.data_args_path;
  const bool per_split = !d.train_data_path.empty() || !d.valid_data_path.empty() || !d.test_data_path.empty();
  if (!d.data_path.empty() && d.data_args_path)
    throw UsageError("--data-path and --data-args-path are mutually exclusive");
  if (whole && per_split)
    throw UsageError("--data-path and --train-data-path/--valid-data-path/--test-data-path are mutually exclusive");
  if (d.mock_data && (whole || per_split)) throw UsageError("--mock-data and data paths are mutually exclusive");
  if (!d.mock_data && !whole && !per_split)
    throw UsageError("--data-path (or --train-data-path, or --mock-data) is required");
  if (whole && !d.split) {
    log::warn("Please specify --split when using --data-path. Using legacy default value of \"969, 30, 1\"");
    d.split = kDefaultSplit;
  }
  // Not required by its definition: the tokenizer files may name the type.
  if (d.tokenizer.type.empty()) throw UsageError("--tokenizer-type is required");
}

// The use of an accepted-and-ignored flag on the command line, if it was given.
const IgnoredFlagUse* ignored_use(const std::vector<IgnoredFlagUse>& ignored, const char* flag) {
  for (const IgnoredFlagUse& use : ignored)
    if (use.flag == flag) return &use;
  return nullptr;
}

void validate_checkpoint(const CheckpointOptions& c, const std::vector<IgnoredFlagUse>& ignored) {
  if (c.save && !c.save_interval) throw UsageError("--save needs --save-interval");
  if (c.save && c.save->empty()) throw UsageError("--save: the checkpoint directory is an empty path");
  if (c.load && c.load->empty()) throw UsageError("--load: the checkpoint directory is an empty path");
  // Megatron saves asynchronously in its distributed formats only (checkpointing.py refuses the
  // legacy torch format); mgt's checkpoints, every rank writing its own files, stand for those.
  const IgnoredFlagUse* format = ignored_use(ignored, "--ckpt-format");
  if (c.async_save && format && format->value == "torch")
    throw UsageError("--async-save needs a distributed checkpoint format, as in Megatron: mgt writes its own "
                     "sharded HDF5 checkpoints (standing for torch_dist); drop --ckpt-format torch");
  if (c.async_save_delay_ms != 0 && !c.async_save) throw UsageError("--async-save-delay-ms needs --async-save");
}

// The checks Megatron makes of flags that mgt accepts and ignores (megatron/training/arguments.py
// validate_args, training.py get_model): a script refused there is refused here.
void validate_ignored_flags(const TrainOptions& o) {
  const auto given = [&](const char* flag) { return ignored_use(o.ignored_flags, flag); };
  // global_vars.py _set_wandb_writer.
  const IgnoredFlagUse* wandb_project = given("--wandb-project");
  const IgnoredFlagUse* wandb_name = given("--wandb-exp-name");
  if (wandb_project && !wandb_project->value.empty() && (!wandb_name || wandb_name->value.empty()))
    throw UsageError("--wandb-project needs --wandb-exp-name (Megatron: Please specify the wandb experiment name!)");
  if (given("--ddp-num-buckets") && o.parallel.ddp_bucket_size)
    throw UsageError("Cannot specify both --ddp-num-buckets and --ddp-bucket-size");
  if (given("--fp16-lm-cross-entropy") && o.optim.precision != Precision::Fp16)
    throw UsageError("--fp16-lm-cross-entropy: lm cross entropy in fp16 only support in fp16 mode.");
  if (o.optim.deterministic_mode && given("--use-flash-attn"))
    throw UsageError("--deterministic-mode: Flash attention can not be used in deterministic mode.");
  if (o.optim.deterministic_mode && given("--cross-entropy-loss-fusion"))
    throw UsageError("--deterministic-mode: Cross Entropy Fusion is currently not deterministic.");
  if (given("--overlap-param-gather-with-optimizer-step")) {
    const ParallelOptions& p = o.parallel;
    const IgnoredFlagUse* format = given("--ckpt-format");
    const char* problem =
        !p.use_distributed_optimizer ? "only supported with distributed optimizer"
        : !p.overlap_param_gather    ? "must be used with --overlap-param-gather"
        : p.virtual_pipeline_model_parallel_size <= 1 ? "only supported with interleaved pipeline parallelism"
        // Megatron's default --ckpt-format torch_dist is its distributed checkpointing.
        : !format || format->value != "torch" ? "not supported with distributed checkpointing yet (Megatron: "
                                                 "--ckpt-format torch only)"
                                              : nullptr;
    if (problem) throw UsageError(std::string("--overlap-param-gather-with-optimizer-step ") + problem);
  }
}

// Megatron profiles nothing when the window is empty; a profile that is asked for and cannot
// count anything is a mistake in the flags.
void validate_profile(const LoggingOptions& l) {
  // Megatron divides the iteration by it.
  if (l.check_weight_hash_interval && *l.check_weight_hash_interval < 1)
    throw UsageError("--check-weight-hash-across-dp-replicas-interval must be at least 1, got " +
                     str(*l.check_weight_hash_interval));
  if (!l.profile && l.profile_gemms) throw UsageError("--profile-gemms needs --profile");
  if (!l.profile && l.profile_timeline) throw UsageError("--profile-timeline needs --profile");
  if (l.profile_timeline && l.profile_timeline->empty()) throw UsageError("--profile-timeline: expected a file name, got ''");
  if (l.profile && l.profile_step_end <= l.profile_step_start)
    throw UsageError("--profile-step-end (" + str(l.profile_step_end) + ") must be greater than --profile-step-start (" +
                     str(l.profile_step_start) + ")");
}

// FP8 with mixture-of-experts layers (model/moe_experts.hpp): Megatron's checks of
// --moe-router-padding-for-fp8 (megatron/core/transformer/transformer_config.py __post_init__),
// and the one combination mgt does not run. (--fp8-param-gather gathers the experts' FP8 weights
// over the expert-data-parallel group: train/fp8_param_gather.hpp.)
void validate_fp8_moe(const TrainOptions& o) {
  if (o.moe.moe_router_padding_for_fp8 && o.moe.enabled()) {
    if (!o.fp8.format)
      throw UsageError("--moe-router-padding-for-fp8 needs --fp8-format (Megatron: fp8 must be specified)");
    if (o.moe.moe_token_dispatcher_type == "allgather")
      throw UsageError("--moe-router-padding-for-fp8 with --moe-token-dispatcher-type allgather: Megatron's allgather "
                       "dispatcher does not support it; use alltoall");
  }
  // The experts' amaxes are reduced over the ranks that hold the same expert (Fp8Training): with
  // experts split over expert-tensor-parallel ranks of their own, that group is not built for it.
  const std::int64_t etp = o.moe.expert_tensor_parallel_size.value_or(o.parallel.tensor_model_parallel_size);
  if (o.fp8.format && o.moe.enabled() && etp != 1 && etp != o.parallel.tensor_model_parallel_size)
    throw UsageError("--fp8-format with --expert-tensor-parallel-size " + std::to_string(etp) +
                     ": not supported by mgt-train (FP8 experts split over expert-tensor-parallel ranks other than "
                     "1 or --tensor-model-parallel-size)");
}

}  // namespace

void validate_train_options(TrainOptions& o, int world_size) {
  check_flag_values(train_flags(o), "mgt-train");
  validate_parallel(o.parallel, world_size);
  validate_batch(o.optim, o.parallel);
  validate_run_length(o.optim);
  validate_rampup(o.optim, o.parallel);
  validate_model(o.model);
  validate_tensor_parallel(o.model, o.parallel);
  validate_virtual_pipeline(o);
  validate_context_parallel(o.model, o.parallel);
  validate_moe_options(o);
  validate_fp8_moe(o);
  // Megatron's split of the layers over the stages (arguments.py, TransformerConfig).
  pipeline_stages(*o.model.num_layers, pipeline_split(o.parallel));
  validate_recompute_groups(o.model, o.parallel);
  validate_schedule(o.optim);
  validate_precision_aware_optimizer(o.optim, o.parallel);
  validate_data(o.data);
  validate_checkpoint(o.checkpoint, o.ignored_flags);
  validate_ignored_flags(o);
  validate_profile(o.logging);
  validate_fp8_options(o.fp8, o.optim.precision, o.parallel.use_distributed_optimizer, *o.model.num_layers);
  validate_planner_options(o);
}

std::int64_t TrainOptions::total_train_iters() const {
  if (optim.train_iters) return *optim.train_iters;
  if (optim.train_samples && optim.global_batch_size) return global_batch_size_schedule().train_iters(*optim.train_samples);
  return 0;
}

GlobalBatchSizeSchedule TrainOptions::global_batch_size_schedule() const {
  return GlobalBatchSizeSchedule(optim.global_batch_size.value_or(0), optim.rampup_batch_size);
}

std::int64_t TrainOptions::num_microbatches() const {
  if (!optim.global_batch_size || !optim.micro_batch_size) return 0;
  return *optim.global_batch_size / (*optim.micro_batch_size * parallel.data_parallel_size);
}

}  // namespace mgt
