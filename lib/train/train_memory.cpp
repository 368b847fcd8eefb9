#include "train/train_memory.hpp"

#include <memory>
#include <ostream>

#include "core/checked_size.hpp"
#include "core/error.hpp"
#include "data/python_json.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/gpt_config_from_options.hpp"
#include "train/layout_plan_output.hpp"

namespace mgt {

namespace {

constexpr const char* kWhat = "training this model";

// A size beyond 64 bits has no number to print: null, and "beyond_64_bits" says so.
PyValue size_value(std::int64_t size) {
  return SaturatingSize(size).saturated() ? PyValue::none() : PyValue::integer(size);
}

}  // namespace

MemoryEstimateRequest train_memory_request(const TrainOptions& o, std::optional<FloatType> activation_type) {
  MemoryEstimateRequest r;
  r.use = MemoryUse::kTraining;
  r.seq_length = o.model.seq_length.value_or(0);
  r.micro_batch_size = o.optim.micro_batch_size.value_or(0);
  r.num_microbatches = o.num_microbatches();
  r.layout.tensor_parallel = o.parallel.tensor_model_parallel_size;
  r.layout.pipeline_parallel = o.parallel.pipeline_model_parallel_size;
  r.layout.data_parallel = o.parallel.data_parallel_size;
  r.layout.context_parallel = o.parallel.context_parallel_size;
  r.layout.cp_comm_type = parse_cp_comm_types(o.parallel.cp_comm_type);
  r.layout.distributed_optimizer = o.parallel.use_distributed_optimizer;
  r.layout.virtual_pipeline = o.parallel.virtual_pipeline_model_parallel_size;
  r.layout.microbatch_group = o.parallel.microbatch_group_size_per_virtual_pipeline_stage.value_or(0);
  r.layout.sequence_parallel = o.parallel.sequence_parallel;
  // --bf16/--fp16 on a GPU: 2-byte activations and compute copy beside the fp32 parameters
  // (TrainingRun::apply_precision); the CPU backend computes in fp32 with no copy.
  const bool two_byte = activation_type ? *activation_type != FloatType::kF32
                                        : o.optim.precision != Precision::Fp32 && o.device.rfind("cuda", 0) == 0;
  r.bytes_per_weight = two_byte ? 2 : 4;
  r.master_weights = two_byte;
  r.cuda_workspaces = two_byte || o.device.rfind("cuda", 0) == 0;
  r.bf16_gradient_copy =
      o.parallel.grad_reduce_in_bf16 && o.parallel.data_parallel_size * o.parallel.context_parallel_size > 1;
  r.moment_bytes = float_type_size(adam_moment_type(o.optim, o.optim.exp_avg_dtype)) +
                   float_type_size(adam_moment_type(o.optim, o.optim.exp_avg_sq_dtype));
  r.evaluation_too = o.logging.eval_iters > 0;
  return r;
}

FloatType adam_moment_type(const OptimizationOptions& optim, const std::string& dtype) {
  return optim.use_precision_aware_optimizer && dtype == "bf16" ? FloatType::kBf16 : FloatType::kF32;
}

FloatType gpu_activation_type(const TrainOptions& o) {
  switch (o.optim.precision) {
    case Precision::Bf16:
      return FloatType::kBf16;
    case Precision::Fp16:
      return FloatType::kF16;
    case Precision::Fp32:
      break;
  }
  return FloatType::kF32;
}

MemoryEstimate check_train_memory(const TrainOptions& options, const GptConfig& config,
                                  const std::optional<AvailableMemory>& available, FloatType activation_type) {
  return check_memory(config, train_memory_request(options, activation_type), available, kWhat);
}

int run_train_dry_run(const TrainOptions& o, std::ostream& out, std::ostream& err, const LayoutPlan* plan) {
  const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(o.data.tokenizer);
  const std::int64_t padded_vocab = padded_vocab_size(tokenizer->vocab_size(), o.model.make_vocab_size_divisible_by,
                                                      o.parallel.tensor_model_parallel_size);
  const GptConfig config = gpt_config_from_options(o, padded_vocab);
  const MemoryEstimateRequest request = train_memory_request(o);
  MemoryEstimate e;
  try {
    e = estimate_memory(config, request);
  } catch (const Error& error) {
    throw Error(std::string(kWhat) + ": " + error.what(), error.exit_code());
  }
  const std::optional<AvailableMemory> available = available_host_memory();
  const bool fits = available && !e.beyond_64_bits && e.total_bytes <= available->bytes;

  PyValue layout = PyValue::dict();
  layout.set("world_size", PyValue::integer(o.parallel.world_size));
  layout.set("tensor_model_parallel_size", PyValue::integer(request.layout.tensor_parallel));
  layout.set("pipeline_model_parallel_size", PyValue::integer(request.layout.pipeline_parallel));
  layout.set("data_parallel_size", PyValue::integer(request.layout.data_parallel));
  layout.set("context_parallel_size", PyValue::integer(request.layout.context_parallel));
  layout.set("use_distributed_optimizer", PyValue::boolean(request.layout.distributed_optimizer));
  PyValue memory = PyValue::dict();
  memory.set("weights", size_value(e.weight_bytes));
  memory.set("master_weights", size_value(e.master_weight_bytes));
  memory.set("fp8_weights", size_value(e.fp8_weight_bytes));
  memory.set("gradients", size_value(e.gradient_bytes));
  memory.set("optimizer_state", size_value(e.optimizer_bytes));
  memory.set("activations", size_value(e.activation_bytes));
  memory.set("workspaces", size_value(e.workspace_bytes));
  memory.set("total", size_value(e.total_bytes));
  PyValue host = PyValue::dict();
  host.set("bytes", available ? PyValue::integer(available->bytes) : PyValue::none());
  host.set("source", available ? PyValue::string(available->source) : PyValue::none());
  PyValue v = PyValue::dict();
  v.set("parameters", size_value(e.parameters));
  v.set("parameters_per_rank", size_value(e.parameters_per_rank));
  v.set("beyond_64_bits", PyValue::boolean(e.beyond_64_bits));
  v.set("padded_vocab_size", PyValue::integer(padded_vocab));
  v.set("seq_length", PyValue::integer(request.seq_length));
  v.set("micro_batch_size", PyValue::integer(request.micro_batch_size));
  v.set("layout", std::move(layout));
  v.set("memory_per_rank_bytes", std::move(memory));
  PyValue recomputation = PyValue::dict();
  recomputation.set("granularity", config.recompute_granularity == RecomputeGranularity::kNone
                                       ? PyValue::none()
                                       : PyValue::string(std::string(to_string(config.recompute_granularity))));
  recomputation.set("activations_without_recomputation", size_value(e.activation_bytes_without_recomputation));
  const bool sizes_known = !SaturatingSize(e.activation_bytes_without_recomputation).saturated() &&
                           !SaturatingSize(e.activation_bytes).saturated();
  recomputation.set("activations_saved",
                    sizes_known ? PyValue::integer(e.activation_bytes_without_recomputation - e.activation_bytes)
                                : PyValue::none());
  v.set("recomputation", std::move(recomputation));
  v.set("available_memory", std::move(host));
  v.set("fits", available || e.beyond_64_bits ? PyValue::boolean(fits) : PyValue::none());
  if (plan) v.set("layout_plan", layout_plan_json(*plan));
  out << v.dumps() << "\n";
  out.flush();

  if (e.beyond_64_bits) {
    err << "mgt-train --dry-run: the model's sizes overflow 64-bit arithmetic: " << describe_memory_estimate(e)
        << "; mgt-train would refuse to start\n";
    if (plan) write_layout_plan_table(*plan, err);
    return kExitOk;
  }
  err << "mgt-train --dry-run: " << e.parameters << " parameters (" << e.parameters_per_rank << " per rank)\n"
      << "memory per rank: " << format_bytes(static_cast<double>(e.total_bytes)) << " = "
      << describe_memory_estimate(e) << "\n";
  if (config.recompute_granularity != RecomputeGranularity::kNone) {
    const std::int64_t saved = e.activation_bytes_without_recomputation - e.activation_bytes;
    err << "activation recomputation (" << to_string(config.recompute_granularity) << "): activations "
        << format_bytes(static_cast<double>(e.activation_bytes)) << " instead of "
        << format_bytes(static_cast<double>(e.activation_bytes_without_recomputation)) << " without, "
        << format_bytes(static_cast<double>(saved)) << " saved per rank\n";
  }
  if (available)
    err << "available: " << format_bytes(static_cast<double>(available->bytes)) << " (" << available->source << "): "
        << (fits ? "fits" : "does not fit; mgt-train would refuse to start") << "\n";
  else
    err << "available memory unknown: no check possible\n";
  if (plan) write_layout_plan_table(*plan, err);
  return kExitOk;
}

}  // namespace mgt
