// What a run will allocate, estimated before anything is: weights, gradients, the optimizer's
// state, the activations of one micro-batch and, for generation, the key/value cache, per rank.
// Programs check it against the memory they may use (core/available_memory.hpp) before building
// a model, so that one too large is refused with the numbers instead of dying in an allocation
// (std::bad_alloc) or growing until the kernel kills it. The arithmetic is overflow-checked.
//
// The parallel layout and the memory to compare with are inputs, so that the same estimate can
// plan a layout: choose TP/PP/DP for a device memory size. Today's model runs on one rank.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/available_memory.hpp"
#include "kernels/backend.hpp"
#include "model/context_parallel_attention.hpp"
#include "model/gpt_config.hpp"
#include "model/gpt_parameters.hpp"

namespace mgt {

enum class MemoryUse {
  kTraining,    // weights, gradients, Adam's moments, training and evaluation activations
  kEvaluation,  // weights and evaluation activations
  kGeneration,  // as evaluation, with last-position logits and the key/value cache
  kConversion,  // weights only, held in up to three copies while a checkpoint is converted
};

struct ParallelLayout {
  std::int64_t tensor_parallel = 1;
  std::int64_t pipeline_parallel = 1;
  std::int64_t data_parallel = 1;
  bool distributed_optimizer = false;  // Adam's state (and master weights) sharded over DP (× CP)
  // The interleaved schedule: model chunks per pipeline rank and its micro-batch group size
  // (0: pipeline_parallel).
  std::int64_t virtual_pipeline = 1;
  std::int64_t microbatch_group = 0;
  // Training passes hold seq_length / context_parallel tokens per rank, plus the context-parallel
  // attention's scratch (of cp_comm_type); evaluation passes whole sequences.
  std::int64_t context_parallel = 1;
  CpCommType cp_comm_type = CpCommType::kP2p;
  // --sequence-parallel (with tensor_parallel > 1): the training activations outside the
  // tensor-parallel regions hold seq / TP tokens.
  bool sequence_parallel = false;
};

struct MemoryEstimateRequest {
  MemoryUse use = MemoryUse::kTraining;
  std::int64_t seq_length = 0;  // tokens per row; generation: the longest sequence (cache capacity)
  std::int64_t micro_batch_size = 1;
  // Micro-batches per step on each data-parallel rank (global batch / (micro-batch × DP)): no more
  // than these are in flight on a pipeline stage; 0: not known, the schedule's most.
  std::int64_t num_microbatches = 0;
  ParallelLayout layout;
  // The activation type's size, which the weights' compute copy shares: 4: fp32 (the CPU backend);
  // 2: bf16/fp16 (--bf16/--fp16 on a GPU).
  std::int64_t bytes_per_weight = 4;
  // The fp32 parameters beside a 2-byte compute copy (model/gpt_parameters.hpp). mgt keeps them
  // whole on every rank: the distributed optimizer shards Adam's moments, not these.
  bool master_weights = false;
  // --grad-reduce-in-bf16 over more than one data-parallel rank: a bf16 copy of the whole
  // gradient buffer for the reduction (train/bf16_gradient_copy.hpp), counted with the gradients.
  bool bf16_gradient_copy = false;
  // Adam's two moments per parameter: 8 bytes, 6 or 4 with the precision-aware optimizer's bf16.
  std::int64_t moment_bytes = 8;
  // A CUDA run: the GEMM library's workspace and the attention backward's scratch, live at the
  // activations' peak, are counted (MemoryEstimate::workspace_bytes).
  bool cuda_workspaces = false;
  bool evaluation_too = true;  // training: validation keeps its own activations
};

// A model loaded for evaluation or generation on `backend` (model/gpt_parameters.hpp,
// ParameterUse::kInference): its compute type's bytes per weight, and the fp32 parameters beside
// them only where the forward reads those (a zero-centred norm's 1 + w).
void inference_weight_bytes(const GptConfig& config, const Backend& backend, MemoryEstimateRequest& request);

struct MemoryEstimate {
  std::int64_t parameters = 0;           // of the whole model
  std::int64_t parameters_per_rank = 0;  // of the largest pipeline stage's tensor shard
  std::int64_t weight_bytes = 0;         // conversion: every copy
  std::int64_t master_weight_bytes = 0;
  // FP8 training (GptConfig::fp8): each FP8 linear layer's weight cast to FP8 twice, in rows and in
  // columns (model/linear_layer.hpp).
  std::int64_t fp8_weight_bytes = 0;
  std::int64_t gradient_bytes = 0;
  std::int64_t optimizer_bytes = 0;  // Adam's first and second moments
  std::int64_t activation_bytes = 0;
  // Training: what the activations would take without --recompute-granularity (equal to
  // activation_bytes without it); what recomputation saves is the difference.
  std::int64_t activation_bytes_without_recomputation = 0;
  std::int64_t kv_cache_bytes = 0;
  std::int64_t workspace_bytes = 0;  // MemoryEstimateRequest::cuda_workspaces
  std::int64_t total_bytes = 0;  // per rank
  // A size went beyond 64 bits: it stands at SaturatingSize::kSaturated (core/checked_size.hpp),
  // "more than 8 EiB", and the model cannot fit anywhere.
  bool beyond_64_bits = false;
};

// Never wraps around: sizes beyond 64 bits saturate (beyond_64_bits). Throws mgt::UsageError for
// an invalid configuration.
MemoryEstimate estimate_memory(const GptConfig& config, const MemoryEstimateRequest& request);

// Parameters one rank holds under `layout`: tensor-parallel shards of the large matrices (and the
// vocabulary), replicated norms and row-parallel biases, the layers of the largest pipeline stage,
// the embeddings on the first stage and the output layer on the last (a tied one there too).
std::int64_t parameters_per_rank(const GptConfig& config, const ParallelLayout& layout);
// Of those, the routed experts' (on the pipeline stage with the most MoE layers).
std::int64_t routed_expert_parameters_per_rank(const GptConfig& config, const ParallelLayout& layout);

// "weights 1.2 GiB + gradients 1.2 GiB + Adam moments 2.4 GiB + activations 300.0 MiB"
std::string describe_memory_estimate(const MemoryEstimate& estimate);

// Throws mgt::Error "WHAT needs an estimated T of memory per rank for P parameters (BREAKDOWN),
// but only A is available (SOURCE)" when the estimate exceeds `available`, and for an estimate
// beyond 64 bits even when `available` is unknown.
void require_memory(const MemoryEstimate& estimate, const std::optional<AvailableMemory>& available,
                    const std::string& what);

// The memory a backend's buffers come from, as far as it is known (Backend::available_memory):
// the host's for the CPU backend, the device's free memory for a GPU; nullopt: no check.
std::optional<AvailableMemory> memory_available_to(const Backend& backend);

// estimate_memory, then require_memory against `available`. An estimate that cannot be made (an
// invalid configuration) is an error starting with `what` too.
MemoryEstimate check_memory(const GptConfig& config, const MemoryEstimateRequest& request,
                            const std::optional<AvailableMemory>& available, const std::string& what);

}  // namespace mgt
