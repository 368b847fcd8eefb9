// The memory a training run needs, estimated from its flags (model/memory_estimate.hpp): checked
// before the model is built, and printed by mgt-train --dry-run.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "core/available_memory.hpp"
#include "model/gpt_config.hpp"
#include "model/memory_estimate.hpp"
#include "train/train_options.hpp"

namespace mgt {

struct LayoutPlan;  // train/layout_planner.hpp

// What mgt-train allocates per rank for validated `options`: the training and validation
// activations of one micro-batch of --seq-length tokens, Adam in fp32 on the layout the
// parallelism flags give. `activation_type`: the backend's (Backend::activation_type); without
// it, --bf16/--fp16 store 2-byte activations and compute copy where --device names a GPU (the
// CPU backend computes in fp32).
MemoryEstimateRequest train_memory_request(const TrainOptions& options,
                                           std::optional<FloatType> activation_type = std::nullopt);

// The activation type a GPU gives `options`' --bf16/--fp16/fp32: what the layout planner, which
// plans GPU runs, estimates with.
FloatType gpu_activation_type(const TrainOptions& options);

// The type Adam keeps a moment in: bf16 where --use-precision-aware-optimizer gives `dtype`
// (--exp-avg-dtype, --exp-avg-sq-dtype) as bf16, fp32 otherwise.
FloatType adam_moment_type(const OptimizationOptions& optim, const std::string& dtype);

// Refuses (mgt::Error, exit code 1) a run whose estimate exceeds `available`.
MemoryEstimate check_train_memory(const TrainOptions& options, const GptConfig& config,
                                  const std::optional<AvailableMemory>& available, FloatType activation_type);

// --dry-run: the tokenizer (for the padded vocabulary), the configuration and the estimate, as a
// JSON object on `out` and a summary on `err`; no data is read and nothing is allocated. The
// estimate is compared with the host's memory, and "fits" says whether the run would start.
// With a `plan`, the JSON gains it as "layout_plan" and the summary is followed by its table.
int run_train_dry_run(const TrainOptions& options, std::ostream& out, std::ostream& err,
                      const LayoutPlan* plan = nullptr);

}  // namespace mgt
