// mgt-train --dry-run's layout planner (train/layout_planner.hpp): the flags that say for how many
// ranks and which GPU it plans. All are mgt's own; Megatron has no planner.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace mgt {

struct TrainOptions;

struct PlannerOptions {
  // --world-size N: plan for N ranks without a launcher (a login node); under a launcher its
  // world size is taken, and a different --world-size is refused.
  std::optional<std::int64_t> world_size;
  std::optional<std::string> gpu;             // --planner-gpu h100|h200: the cost constants' table
  std::optional<double> gpu_memory_gib;       // --planner-gpu-memory GiB: each GPU's memory
};

// The planner's flags are for --dry-run only, and --world-size plans GPU runs (not --device cpu).
// Throws UsageError naming the flag.
void validate_planner_options(const TrainOptions& options);

// The number of ranks the flags are validated for: --world-size without a launcher, else the
// launcher's. Throws UsageError when --world-size contradicts the launcher's (`launched_size` > 1).
int planned_world_size(const TrainOptions& options, int launched_size);

}  // namespace mgt
