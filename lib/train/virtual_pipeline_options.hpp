// Megatron's checks of the interleaved schedule's flags (megatron/training/arguments.py
// validate_args; megatron/core/pipeline_parallel/schedules.py's checks of the micro-batch group),
// made before the run starts.
#pragma once
#include <string>

#include "train/train_options.hpp"

namespace mgt {

// Sets o.parallel.virtual_pipeline_model_parallel_size from --num-layers-per-virtual-pipeline-stage
// or --num-virtual-stages-per-pipeline-rank (1 without either, or when they give one chunk), and
// refuses, with a UsageError naming the flags:
//   - both flags together, a value below 1;
//   - --num-layers-per-virtual-pipeline-stage with --decoder-first/last-pipeline-num-layers, or
//     with num-layers not divisible by PP, or num-layers / PP not divisible by it;
//   - interleaving with PP 1, or (mgt) with an uneven first or last stage;
//   - --microbatch-group-size-per-virtual-pipeline-stage without interleaving, or outside
//     [PP, micro-batches], or leaving a last group of 1 … PP − 1 micro-batches, for every number of
//     micro-batches per iteration the run reaches (--rampup-batch-size included).
// Needs the data-parallel size and the global batch size set (validate_parallel, validate_batch).
void validate_virtual_pipeline(TrainOptions& o);

// The schedule for the start-up line of the pipeline groups: "1F1B schedule", or "interleaved
// 1F1B schedule, 2 model chunks per stage, micro-batch groups of 4".
std::string schedule_description(const ParallelOptions& p);

}  // namespace mgt
