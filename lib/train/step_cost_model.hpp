// The layout planner's cost model: the time of one training iteration of a dense GPT under a
// parallel layout, from the model's shape and a GPU's constants (train/gpu_cost_constants.hpp).
// It is small on purpose, each term a count divided by a rate:
//   - GEMMs (the linear layers and the output layer): FLOPs / (peak × GEMM efficiency), FP8's
//     faster by its speedup, plus its casts (bytes / bandwidth);
//   - attention: its FLOPs (causal, counted at half as Megatron counts them) at its own rate;
//   - memory-bound passes (norms, residual adds, rotary embedding, the activation, the loss over
//     the vocabulary, AdamW): bytes / (HBM bandwidth × efficiency);
//   - tensor-parallel collectives: per layer and micro-batch two all-gathers and two
//     reduce-scatters of the layer's activations forward (with sequence parallelism; two
//     all-reduces, the same bytes, without), as many backward, bytes × (t − 1)/t / bandwidth;
//   - context parallelism's ring: keys and values passed round, forward and (twice) backward, the
//     part attention does not hide at a measured rate of its bytes;
//   - pipeline sends of each chunk's activations and gradients; the 1F1B bubble: the stage time
//     per micro-batch × (m + (p − 1)/v), a fraction (p − 1)/(v·m) of the work;
//   - data-parallel gradient reduce-scatter (fp32) and weight all-gather (bf16) under the
//     distributed optimizer, an all-reduce without, over the links; under --overlap-grad-reduce
//     at the slower rate measured beside computation, exposed where it outlasts the last
//     micro-batch's backward (the gather: the first one's forward), never less than a share;
//   - recomputation: selective adds attention's forward again, full the whole layers' forward
//     (their collectives included);
//   - a mixture of experts: its MoE layers' MLP as the router, each token's top-k experts (GEMMs
//     at the grouped GEMMs' measured share of the dense rate), the shared expert, the tokens'
//     permutation and combination, and under expert parallelism four all-to-alls per layer and
//     micro-batch, exposed; the routed experts' gradients reduced over DP × CP / EP ranks.
// The slowest pipeline stage sets the pace: the first holds the embedding, the last the output
// layer and the loss. Within one node; across nodes the estimate is optimistic.
#pragma once
#include <cstdint>

#include "model/gpt_config.hpp"
#include "train/gpu_cost_constants.hpp"
#include "train/train_options.hpp"

namespace mgt {

// What the model needs of a validated run.
struct StepCostShape {
  GptConfig config;  // resolved, with the padded vocabulary and the recomputation flags
  std::int64_t global_batch_size = 0;
  std::int64_t micro_batch_size = 0;
  std::int64_t tensor_parallel = 1;
  std::int64_t pipeline_parallel = 1;
  std::int64_t virtual_pipeline = 1;
  std::int64_t context_parallel = 1;
  std::int64_t data_parallel = 1;
  bool sequence_parallel = false;
  bool distributed_optimizer = false;
  bool overlap_grad_reduce = false;
  std::int64_t parameters_per_rank = 0;  // the largest stage's shard (model/memory_estimate.hpp)
  std::int64_t expert_parallel = 1;
  std::int64_t expert_parameters_per_rank = 0;  // the routed experts' among them
};

// From options validated for their world size (validate_train_options) and their configuration.
StepCostShape step_cost_shape(const TrainOptions& validated, const GptConfig& config);

struct StepEstimate {
  double step_seconds = 0;
  double tokens_per_second_per_gpu = 0;
  double mfu = 0;  // Megatron's model FLOPs / (step × GPUs × dense bf16 peak)
  // The parts, seconds per iteration on the slowest stage (they add up to step_seconds).
  double gemm_seconds = 0;
  double attention_seconds = 0;
  double memory_bound_seconds = 0;  // element-wise passes, the loss, FP8's casts
  double tensor_parallel_seconds = 0;
  double context_parallel_seconds = 0;  // exposed
  double expert_parallel_seconds = 0;   // the all-to-alls, exposed
  double pipeline_send_seconds = 0;
  double bubble_seconds = 0;
  double data_parallel_seconds = 0;  // exposed
  double optimizer_seconds = 0;
};

StepEstimate estimate_step(const StepCostShape& shape, const GpuCostConstants& gpu);

}  // namespace mgt
