// TrainingRun's set-up (training_run.hpp): the layout of the ranks, the tokenizer, model,
// optimizer, scheduler and loss scaler, the checkpoint to resume, and the data, all before the
// first step.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint_discovery.hpp"
#include "ckpt/tokenizer_description.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "dist/parallel_layout.hpp"
#include "dist/rank_processes.hpp"
#include "kernels/backend_factory.hpp"
#include "model/parameter_table.hpp"
#include "model/pipeline_stage.hpp"
#include "model/recompute_plan.hpp"
#include "train/gpt_config_from_options.hpp"
#include "train/moe_upcycling_load.hpp"
#include "train/rank_backend_options.hpp"
#include "train/run_description.hpp"
#include "train/train_memory.hpp"
#include "train/training_run.hpp"
#include "train/virtual_pipeline_options.hpp"

namespace mgt {

TrainingRun::TrainingRun(const TrainOptions& options, const TrainerSettings& settings, const TrainerHooks& hooks)
    : options_(options),
      settings_(settings),
      hooks_(hooks),
      exit_(exit_settings(options.logging)),
      world_(settings.ranks.world ? *settings.ranks.world : own_world_),
      data_parallel_(settings.ranks.data_parallel ? *settings.ranks.data_parallel : own_data_parallel_),
      tensor_parallel_(settings.ranks.tensor_model_parallel ? *settings.ranks.tensor_model_parallel
                                                            : own_tensor_parallel_),
      pipeline_(settings.ranks.pipeline_model_parallel ? *settings.ranks.pipeline_model_parallel : own_pipeline_),
      context_parallel_(settings.ranks.context_parallel ? *settings.ranks.context_parallel : own_context_parallel_),
      gradients_(settings.ranks.data_parallel_with_context ? *settings.ranks.data_parallel_with_context
                                                           : data_parallel_),
      model_parallel_(settings.ranks.model_parallel ? settings.ranks.model_parallel : &tensor_parallel_),
      expert_model_parallel_(settings.ranks.expert_model_parallel),
      expert_data_parallel_(settings.ranks.expert_data_parallel),
      expert_tensor_model_pipeline_(settings.ranks.expert_tensor_model_pipeline),
      expert_tensor_and_model_parallel_(settings.ranks.expert_tensor_and_model_parallel),
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
  if (context_parallel_.size() != options.parallel.context_parallel_size ||
      gradients_.size() != options.parallel.data_parallel_size * options.parallel.context_parallel_size)
    throw Error("internal error: a run validated for context-parallel size " +
                std::to_string(options.parallel.context_parallel_size) + " given a group of " +
                std::to_string(context_parallel_.size()) + " and a gradient group of " +
                std::to_string(gradients_.size()));
  const std::int64_t ep = options.moe.expert_model_parallel_size;
  const bool expert_groups = expert_model_parallel_ != nullptr && expert_data_parallel_ != nullptr &&
                             expert_tensor_model_pipeline_ != nullptr;
  // Megatron's two grids tile the same world: expert-tensor x ep x expert-dp = tp x cp x dp.
  const std::int64_t tp = options.parallel.tensor_model_parallel_size;
  const std::int64_t etp = options.moe.expert_tensor_parallel_size.value_or(tp);
  // dist::ParallelLayout::separate_expert_grid.
  const bool own_tensor_grid = options.moe.enabled() && etp > 1 && etp != tp;
  const bool separate_grid = ep > 1 || own_tensor_grid;
  if (separate_grid != expert_groups || own_tensor_grid != (expert_tensor_and_model_parallel_ != nullptr) ||
      (own_tensor_grid && expert_tensor_and_model_parallel_->size() != etp * ep) ||
      (separate_grid && (expert_model_parallel_->size() != ep ||
                  etp * expert_model_parallel_->size() * expert_data_parallel_->size() !=
                      options.parallel.tensor_model_parallel_size * gradients_.size() ||
                  expert_tensor_model_pipeline_->size() != etp * ep * options.parallel.pipeline_model_parallel_size)))
    throw Error("internal error: a run validated for expert-parallel size " + std::to_string(ep) +
                " and expert-tensor-parallel size " + std::to_string(etp) + " given other expert groups");
  if (pipeline_.size() != options.parallel.pipeline_model_parallel_size)
    throw Error("internal error: a run validated for pipeline-parallel size " +
                std::to_string(options.parallel.pipeline_model_parallel_size) + " given a group of " +
                std::to_string(pipeline_.size()));
}

// Megatron's first line (arguments.py validate_args), and the groups of a distributed run.
void TrainingRun::print_layout() {
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
  const dist::ParallelLayout layout(
      dist::ParallelFlags{p.tensor_model_parallel_size, p.pipeline_model_parallel_size, p.distributed_timeout_minutes,
                          p.context_parallel_size, options_.moe.expert_model_parallel_size,
                          options_.moe.expert_tensor_parallel_size.value_or(0)},
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
                 pipeline_.transport() + "), layers per stage " + split + ", " + schedule_description(p));
  }
  if (p.context_parallel_size > 1) {
    output_.line("> context-parallel groups: " + groups_of(dist::GroupKind::ContextParallel) + " (" +
                 context_parallel_.transport() + "), " +
                 (parse_cp_comm_types(p.cp_comm_type) == CpCommType::kA2a ? "all-to-all attention (--cp-comm-type a2a), "
                                                                          : "ring attention (--cp-comm-type p2p), ") +
                 std::to_string(*options_.model.seq_length / p.context_parallel_size) + " tokens per rank");
    output_.line("> data-parallel groups with context parallelism (gradients): " +
                 groups_of(dist::GroupKind::DataParallelWithContext) + " (" + gradients_.transport() + ")");
  }
  output_.line("> data-parallel groups: " + groups_of(dist::GroupKind::DataParallel) + " (" +
               data_parallel_.transport() + ")");
  if (expert_model_parallel_) {
    const std::int64_t experts = *options_.moe.num_experts;
    if (expert_model_parallel_->size() > 1)
      output_.line("> expert-model-parallel groups: " + groups_of(dist::GroupKind::ExpertModelParallel) + " (" +
                   expert_model_parallel_->transport() + "), " +
                   std::to_string(experts / expert_model_parallel_->size()) + " of the " + std::to_string(experts) +
                   " experts per rank, tokens by " +
                   (options_.moe.moe_token_dispatcher_type == "allgather" ? "all-gather and reduce-scatter"
                                                                           : "all-to-all"));
    output_.line("> expert-data-parallel groups (the experts' gradients): " +
                 groups_of(dist::GroupKind::ExpertDataParallel) + " (" + expert_data_parallel_->transport() + ")");
  }
  if (expert_tensor_and_model_parallel_)
    output_.line("> expert-tensor-parallel groups (each expert's weights split " +
                 std::to_string(layout.expert_tensor_parallel_size()) + " ways): " +
                 groups_of(dist::GroupKind::ExpertTensorParallel) + ", expert-tensor-and-model-parallel groups " +
                 "(the tokens to the experts): " + groups_of(dist::GroupKind::ExpertTensorAndModelParallel) + " (" +
                 expert_tensor_and_model_parallel_->transport() + ")");
  // Collective: every rank runs print_layout.
  output_.line(dist::rank_processes_line(dist::gather_rank_processes(world_)));
}

// Megatron's writer lives on the rank that prints; here that is world rank 0.
void TrainingRun::open_tensorboard() {
  if (!options_.logging.tensorboard_dir) return;
  output_.line("> setting tensorboard ...");
  tensorboard_.emplace(options_.logging, world_.size());
}

void TrainingRun::build_model() {
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
  const std::string recomputation = describe_recomputation(
      config, pipeline_stages(*options_.model.num_layers, pipeline_split(options_.parallel)).front().layers_of(
                  config.num_layers));
  if (!recomputation.empty()) output_.line("> activation recomputation: " + recomputation);
  // Before any allocation: a model that cannot fit is refused with the numbers.
  check_train_memory(options_, config, memory_available_to(backend_), backend_.activation_type());
  output_.line("building GPT model ...");
  TensorParallelism tp;
  if (tensor_parallel_size() > 1) tp = {&tensor_parallel_, options_.parallel.sequence_parallel};
  const std::vector<PipelineStage> stages =
      pipeline_stages(*options_.model.num_layers, pipeline_split(options_.parallel));
  PipelineParallelism pp;
  if (pipeline_parallel_size() > 1) pp = {stages.at(static_cast<std::size_t>(pipeline_.rank())), settings_.ranks.embedding};
  model_ = std::make_unique<GptModel>(config, backend_, static_cast<std::uint64_t>(options_.optim.seed), tp, pp,
                                      ExpertParallelism{expert_model_parallel_, expert_tensor_and_model_parallel_});
  if (context_parallel_size() > 1)
    model_->set_context_parallel(&context_parallel_, parse_cp_comm_types(options_.parallel.cp_comm_type));
  // FP8 amaxes are max-reduced over the data-parallel ranks (with context parallelism, its ranks
  // too), as over Megatron's amax reduction group; the model adds the tensor-parallel ones.
  model_->set_fp8_amax_group(&gradients_);
  // The routed experts' amaxes: over the ranks that hold the same experts (Fp8Training).
  model_->set_fp8_expert_amax_group(expert_data_parallel_);
  if (pipeline_parallel_size() > 1)
    executor_ = std::make_unique<PipelineExecutor>(
        *model_, pipeline_, options_.parallel.microbatch_group_size_per_virtual_pipeline_stage.value_or(0));
  if (options_.logging.check_for_spiky_loss) spiky_loss_ = std::make_shared<SpikyLossCheck>();
  if (executor_) executor_->set_loss_observer(spiky_loss_observer());
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
                                                AdamWSettings{o.adam_beta1, o.adam_beta2, o.adam_eps, o.clip_grad,
                                                              adam_moment_type(o, o.exp_avg_dtype),
                                                              adam_moment_type(o, o.exp_avg_sq_dtype)},
                                                gradients_, options_.parallel.use_distributed_optimizer,
                                                model_parallel_,
                                                ExpertGradientGroups{expert_data_parallel_, expert_tensor_model_pipeline_});
  if (o.use_precision_aware_optimizer)
    output_.line("> precision-aware optimizer: Adam's moments kept in " + o.exp_avg_dtype + " and " + o.exp_avg_sq_dtype +
                 ", updated in fp32");
  if (optimizer_->distributed() && gradient_group_size() > 1) {
    const BufferShard shard = optimizer_->shard();
    output_.line("> distributed optimizer: each data-parallel rank keeps Adam's state for its shard of the " +
                 std::to_string(model_->parameters().params().size()) + " buffer elements (rank 0: [" +
                 std::to_string(shard.begin) + ", " + std::to_string(shard.end) + "))");
  }
  if (options_.parallel.grad_reduce_in_bf16 && gradient_group_size() > 1) {
    bf16_gradients_ = std::make_unique<Bf16GradientCopy>(model_->parameters());
    optimizer_->set_bf16_reduction(bf16_gradients_.get());
    output_.line("> the data-parallel gradient reduction runs on bf16 copies of the gradients (--grad-reduce-in-bf16)");
  }
  register_data_parallel_buffers();
  build_overlap();
  build_fp8_param_gather();
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
void TrainingRun::register_data_parallel_buffers() {
  if (gradient_group_size() == 1) return;
  GptParameters& p = model_->parameters();
  bool registered = gradients_.register_buffer(dist::backend_buffer(p.grads()));
  if (bf16_gradients_) registered = gradients_.register_buffer(dist::backend_buffer(bf16_gradients_->whole())) && registered;
  if (optimizer_->distributed()) {
    registered = gradients_.register_buffer(dist::backend_buffer(p.params())) && registered;
    if (!p.compute_copy().empty())
      registered = gradients_.register_buffer(dist::backend_buffer(p.compute_copy())) && registered;
  }
  if (registered)
    output_.line(std::string("> data-parallel gradients") + (optimizer_->distributed() ? " and weights" : "") +
                 " move between the GPUs with their copy engines (--dp-collectives nccl: NCCL's kernels)");
}

// --overlap-grad-reduce (and --overlap-param-gather): the gradient buffer's buckets, reduced as
// the last backward finishes them. Megatron's bucket size, except on pipeline stages after the
// first, whose reduction is off the critical path (one bucket there, as Megatron does).
void TrainingRun::build_overlap() {
  const ParallelOptions& p = options_.parallel;
  if (!p.overlap_grad_reduce || gradient_group_size() == 1) return;
  std::optional<std::int64_t> bucket_size = p.ddp_bucket_size.value_or(default_ddp_bucket_size(gradient_group_size()));
  if (pipeline_parallel_size() > 1 && pipeline_.rank() > 0) bucket_size.reset();
  std::vector<GradientBucket> buckets = gradient_buckets(
      model_->parameters(), bucket_size, [&](const ParameterEntry& e) { return model_->gradient_finalized_later(e); });
  // The experts' parameters (last in the buffer) are reduced over the expert-data-parallel group
  // after the backward (AdamWOptimizer::reduce_gradients): the buckets stop where they begin.
  const std::int64_t experts = model_->parameters().table().expert_begin;
  std::erase_if(buckets, [&](const GradientBucket& b) { return b.begin >= experts; });
  for (GradientBucket& b : buckets) b.end = std::min(b.end, experts);
  // With --overlap-param-gather the experts' weights are gathered over their own group beside them.
  const ExpertParameterRegion expert_region{experts, model_->parameters().params().size(), expert_data_parallel_};
  overlap_ = std::make_unique<OverlappedDataParallel>(model_->parameters(), std::move(buckets), gradients_,
                                                      p.use_distributed_optimizer, bf16_gradients_.get(), expert_region);
  model_->set_parameter_hooks(overlap_.get());
  if (p.overlap_param_gather) optimizer_->set_param_gather_deferred(true);
  output_.line("> overlapping the data-parallel " +
               std::string(p.use_distributed_optimizer ? "reduce-scatter" : "all-reduce") +
               " of the gradients with the backward" + (p.overlap_param_gather ? " and the weights' all-gather with the forward" : "") +
               ": " + std::to_string(overlap_->buckets().size()) + " bucket(s) on rank 0 (--ddp-bucket-size " +
               (bucket_size ? std::to_string(*bucket_size) : std::string("unbounded")) + ")");
}

// --fp8-param-gather: the distributed optimizer's all-gather moves the FP8 linear layers' weights
// as FP8 codes (train/fp8_param_gather.hpp), each sharded region's over its group: the region
// before the experts' over the data-parallel group, the routed experts' (expert parallelism) over
// the expert-data-parallel group. One rank has nothing to gather: its layers cast their weights
// once per step as without the flag, to the same codes.
void TrainingRun::build_fp8_param_gather() {
  if (!options_.fp8.param_gather || !model_->fp8() || !optimizer_->distributed()) return;
  GptParameters& p = model_->parameters();
  const std::int64_t experts = p.table().expert_begin;
  if (gradient_group_size() > 1) {
    fp8_gather_ = std::make_unique<Fp8ParamGather>(p, *model_->fp8(), gradients_, BufferShard{0, experts});
    optimizer_->add_fp8_param_gather(*fp8_gather_);
    if (overlap_) overlap_->set_fp8_param_gather(fp8_gather_.get());
    report_fp8_param_gather(*fp8_gather_, "FP8 linear layers", "data-parallel group");
  }
  // A stage without MoE layers has an empty region: nothing to gather.
  if (expert_data_parallel_ && expert_data_parallel_->size() > 1 && experts < p.params().size()) {
    fp8_expert_gather_ = std::make_unique<Fp8ParamGather>(p, *model_->fp8(), *expert_data_parallel_,
                                                          BufferShard{experts, p.params().size()});
    optimizer_->add_fp8_param_gather(*fp8_expert_gather_);
    if (overlap_) overlap_->set_fp8_expert_param_gather(fp8_expert_gather_.get());
    report_fp8_param_gather(*fp8_expert_gather_, "routed experts' FP8 linear layers", "expert-data-parallel group");
  }
}

// The start-up line of one region's --fp8-param-gather: what one step's all-gather moves.
void TrainingRun::report_fp8_param_gather(const Fp8ParamGather& gather, const std::string& layers,
                                          const std::string& group) {
  // Without the flag the step gathers the fp32 weights, or with --overlap-param-gather their
  // compute copy; with it the rest travels as the compute copy where there is one.
  const std::int64_t other = gather.other_element_bytes();
  const std::int64_t without = overlap_ && options_.parallel.overlap_param_gather ? other : 4;
  const std::int64_t before = (gather.fp8_elements() + gather.other_elements()) * without;
  const std::int64_t after = gather.fp8_elements() + gather.other_elements() * other;
  output_.line("> --fp8-param-gather: the weights of " + std::to_string(gather.fp8_weights()) + " " + layers + " (" +
               std::to_string(gather.fp8_elements()) + " elements) are all-gathered as FP8 codes: " +
               std::to_string(after) + " bytes per step over the " + group + " instead of " + std::to_string(before) +
               " (rank 0)");
}

// The padded vocabulary of the checkpoint to resume, when it differs from this run's: kept, as
// Megatron keeps a --padded-vocab-size read from a checkpoint, so that a checkpoint padded for
// another tensor-parallel size reshards on load (the padding rows' logits take part in the
// softmax: re-padding would change the model).
void TrainingRun::keep_checkpoint_padded_vocab() {
  if (!options_.checkpoint.load) return;
  const std::optional<std::int64_t> stored = checkpoint_padded_vocab_size(*options_.checkpoint.load, options_.checkpoint.ckpt_step);
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
std::string TrainingRun::parallel_layout_json() const {
  const ParallelOptions& p = options_.parallel;
  const auto flag = [](bool b) { return b ? std::string("true") : std::string("false"); };
  return "{\"world_size\": " + std::to_string(p.world_size) + ", \"tensor_model_parallel_size\": " +
         std::to_string(p.tensor_model_parallel_size) + ", \"pipeline_model_parallel_size\": " +
         std::to_string(p.pipeline_model_parallel_size) + ", \"data_parallel_size\": " +
         std::to_string(p.data_parallel_size) +
         // Recorded where it is used only: the layouts without it read as before.
         (p.context_parallel_size > 1 ? ", \"context_parallel_size\": " + std::to_string(p.context_parallel_size)
                                      : std::string()) +
         (options_.moe.expert_model_parallel_size > 1
              ? ", \"expert_model_parallel_size\": " + std::to_string(options_.moe.expert_model_parallel_size)
              : std::string()) +
         (expert_tensor_and_model_parallel_
              ? ", \"expert_tensor_parallel_size\": " + std::to_string(*options_.moe.expert_tensor_parallel_size)
              : std::string()) +
         ", \"sequence_parallel\": " + flag(p.sequence_parallel) +
         ", \"use_distributed_optimizer\": " + flag(p.use_distributed_optimizer) +
         ", \"stored_tensors\": \"per_rank\"}";
}

void TrainingRun::load_checkpoint() {
  const CheckpointOptions& c = options_.checkpoint;
  if (!c.load) return;
  // Megatron prints its warning and then sys.exit()s with status 0; a run told to stop on this
  // stops as a failure, so that a job chain does not carry on without the weights.
  if (c.exit_on_missing_checkpoint && !ckpt::find_checkpoint_to_load(*c.load, c.ckpt_step))
    throw Error("--load " + *c.load + " holds no checkpoint (no " + ckpt::tracker_file_path(*c.load) +
                "): --exit-on-missing-checkpoint stops the run");
  if (options_.moe.moe_use_upcycling) return load_upcycled_checkpoint_of_dense_model();
  TrainCheckpointLoadSettings s;
  s.load_optimizer = !c.no_load_optim;
  s.load_rng = !c.no_load_rng;
  s.finetune = c.finetune;
  s.ckpt_step = c.ckpt_step;
  s.scheduler_resume = scheduler_resume(options_);
  const auto directory = load_train_checkpoint(*c.load, parts(), s);
  if (!directory) {
    output_.line("WARNING: could not find the metadata file " + ckpt::tracker_file_path(*c.load));
    output_.line("    will not load any checkpoints and will start from random");
    return;
  }
  // Without the checkpoint's random state the dropout streams continue past those the
  // iterations so far would have used.
  if (c.no_load_rng || c.finetune || ckpt::is_release_directory(*directory))
    progress_.micro_steps = progress_.consumed_train_samples / micro_batch();
  // --fp8-param-gather: the FP8 copies cast from the loaded fp32 weights, as the uninterrupted
  // run's gather cast them after the step it saved at (not from the bf16 compute copy, as a layer
  // would cast them).
  if (fp8_gather_) fp8_gather_->cast_whole_weights();
  if (fp8_expert_gather_) fp8_expert_gather_->cast_whole_weights();
  output_.line("  successfully loaded checkpoint from " + *c.load + " " + model_parallel_coordinates() +
               " at iteration " + std::to_string(progress_.iteration));
}

// --moe-use-upcycling (Megatron's setup_model_and_optimizer): the dense model's checkpoint in
// --load converted into this MoE model (moe_upcycling_load.hpp); save_upcycled_checkpoint then
// writes it to --save. Megatron refuses a --save that holds a checkpoint already: upcycling is
// for the one run that converts.
void TrainingRun::load_upcycled_checkpoint_of_dense_model() {
  const CheckpointOptions& c = options_.checkpoint;
  if (const std::optional<ckpt::CheckpointToResume> existing = ckpt::find_checkpoint_to_resume(*c.save))
    throw UsageError("--moe-use-upcycling: --save " + *c.save + " already holds a checkpoint (" +
                     existing->directory + "); upcycling is for the first run, which converts the dense model: "
                     "resume from --save without the flag");
  // Committed checkpoints are never replaced: the upcycled model takes iteration 1.
  if (*c.save_interval == 1 || last_planned_iteration() == 1)
    throw UsageError("--moe-use-upcycling saves the upcycled model as iteration 1 of --save, as Megatron does, "
                     "and this run would save its own iteration 1 there too (" +
                     std::string(*c.save_interval == 1 ? "--save-interval 1" : "one iteration") + ")");
  const std::optional<UpcycledCheckpoint> upcycled =
      load_upcycled_checkpoint(*c.load, parts(), options_.moe.moe_upcycling_granularity, c.finetune, c.ckpt_step);
  if (!upcycled)
    throw UsageError("--moe-use-upcycling: --load " + *c.load + " holds no checkpoint of the dense model to upcycle");
  progress_.micro_steps = progress_.consumed_train_samples / micro_batch();
  if (fp8_gather_) fp8_gather_->cast_whole_weights();
  if (fp8_expert_gather_) fp8_expert_gather_->cast_whole_weights();
  const UpcyclingPlan& plan = upcycled->plan;
  char scale[32];
  std::snprintf(scale, sizeof scale, "%.9g", static_cast<double>(plan.weight_scale));
  output_.line("  upcycled the dense checkpoint " + upcycled->directory + " " + model_parallel_coordinates() +
               ": each MoE layer's " + std::to_string(*options_.moe.num_experts) + " experts are " +
               std::to_string(plan.expansion_rate) + " copies of its MLP in " + std::to_string(plan.granularity) +
               (plan.granularity == 1 ? " slice" : " slices") + ", their weights scaled by " + scale);
}

void TrainingRun::build_data() {
  data_ = open_train_data(options_, *tokenizer_, padded_vocab_);
  BatchPrefetcher::Settings p;
  p.start_sample = progress_.consumed_train_samples;
  p.micro_batch_size = micro_batch();
  p.data_parallel_size = data_parallel_size();
  p.data_parallel_rank = data_parallel_.rank();
  p.capacity = static_cast<std::size_t>(std::max<std::int64_t>(2, 2 * microbatches()));
  p.split_name = "train";
  p.cyclic = options_.data.dataloader_type == "cyclic";
  p.data_sharding = options_.data.data_sharding;
  train_batches_ = std::make_unique<BatchPrefetcher>(data_.train(), p);
  if (do_valid()) valid_ = std::make_unique<Evaluator>(*model_, data_.valid(), evaluation_settings(Split::Valid));
}

EvaluationSettings TrainingRun::evaluation_settings(Split split) const {
  EvaluationSettings e;
  // Megatron's build_train_valid_test_data_loaders: the validation samples continue where the
  // checkpoint's left off, except under --skip-train, which evaluates from the first.
  e.start_sample = split == Split::Valid && !options_.logging.skip_train ? progress_.consumed_valid_samples : 0;
  e.micro_batch_size = micro_batch();
  e.num_microbatches = microbatches();
  e.data_parallel = &data_parallel_;
  if (pipeline_parallel_size() > 1) e.pipeline = &pipeline_;
  e.microbatch_group_size = options_.parallel.microbatch_group_size_per_virtual_pipeline_stage.value_or(0);
  e.eval_iters = options_.logging.eval_iters;
  e.split_name = split_name(split);
  e.cyclic = options_.data.dataloader_type == "cyclic";
  e.data_sharding = options_.data.data_sharding;
  e.loss_observer = spiky_loss_observer();
  return e;
}

// --bf16 / --fp16 store activations and the weights' compute copy in bf16 / fp16 where the
// backend can (fp32 master weights, gradients and optimizer state stay); --fp16 also scales the
// loss (loss_scaler_) on every backend. A backend that cannot computes in fp32, with a warning.
void TrainingRun::apply_precision() {
  const Precision p = options_.optim.precision;
  if (p == Precision::Fp32) return;
  const bool fp16 = p == Precision::Fp16;
  if (backend_.set_matmul_precision(fp16 ? Backend::MatmulPrecision::kFp16 : Backend::MatmulPrecision::kBf16))
    return;
  log::warn(std::string(fp16 ? "--fp16" : "--bf16") + ": the " + backend_.name() + " backend computes in fp32 here" +
            (fp16 ? "; the loss scaling is applied" : ""));
}

}  // namespace mgt
