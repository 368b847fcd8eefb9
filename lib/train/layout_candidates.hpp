// The layouts the planner considers for a world size: every tensor × pipeline × context parallel
// split of the ranks (data parallelism takes the rest), for a mixture of experts every expert-parallel
// size carved from the data- × context-parallel ranks, the interleaved schedule's model chunks,
// the distributed optimizer on and off, and no, selective or full recomputation — each one kept
// only when mgt-train's own validation (validate_train_options) accepts it, so that the planner
// never proposes a run the trainer refuses; then its memory per rank by the trainer's own
// estimate (train/train_memory.hpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt_config.hpp"
#include "model/memory_estimate.hpp"
#include "train/train_options.hpp"

namespace mgt {

struct LayoutChoice {
  std::int64_t tensor_parallel = 1;
  std::int64_t pipeline_parallel = 1;
  std::int64_t virtual_pipeline = 1;  // model chunks per pipeline rank
  std::int64_t context_parallel = 1;
  std::int64_t data_parallel = 1;
  std::int64_t expert_parallel = 1;  // the experts' tensor-parallel size stays TP's (Megatron's default)
  bool distributed_optimizer = false;
  RecomputeGranularity recompute = RecomputeGranularity::kNone;

  bool operator==(const LayoutChoice&) const = default;
};

// The layout of options validated for their world size. The distributed optimizer with one
// data-parallel (× context-parallel) rank shards nothing: it reads as off, as the candidates
// list it.
LayoutChoice layout_of(const TrainOptions& validated);

// The mgt-train flags that give `layout` (besides the model and batch flags):
// "--tensor-model-parallel-size 2 --sequence-parallel --pipeline-model-parallel-size 2 ...".
std::string layout_flags(const LayoutChoice& layout);

// Every choice by divisibility alone: TP, PP, CP dividing the world size (TP at most 8, one
// node's NVLink domain), VP dividing the layers of a stage (1 with PP = 1), EP dividing both the
// experts (`num_experts`, 0 for a dense model) and DP × CP, the distributed optimizer only where
// it shards (DP × CP > 1).
std::vector<LayoutChoice> enumerate_layouts(std::int64_t num_layers, int world_size, std::int64_t num_experts = 0);

// `unvalidated` (the flags as parsed) with the layout's flags in place of the user's: the
// parallel sizes, --sequence-parallel with TP > 1, the interleaved schedule's
// --num-virtual-stages-per-pipeline-rank (and no uneven first or last stage), the expert-parallel
// size (the experts' tensor-parallel size left to follow TP), the distributed
// optimizer (--overlap-param-gather only with it), recomputation (full: uniform, one layer per
// group), and the global batch size of `validated` (the batch planned for stays the user's).
TrainOptions options_for_layout(const TrainOptions& unvalidated, const TrainOptions& validated,
                                const LayoutChoice& layout);

struct LayoutCandidate {
  LayoutChoice layout;
  TrainOptions options;  // validated for the world size
  GptConfig config;      // with the vocabulary padded for its TP
  MemoryEstimate memory;
  std::string refusal;   // why validation refused it (empty: accepted)
};

// Each enumerated layout, validated (quietly: the trainer's notes are not repeated per layout)
// and, when accepted, estimated. `vocab_size`: the tokenizer's, padded per TP as the trainer pads.
std::vector<LayoutCandidate> layout_candidates(const TrainOptions& unvalidated, const TrainOptions& validated,
                                               int world_size, std::int64_t vocab_size);

}  // namespace mgt
