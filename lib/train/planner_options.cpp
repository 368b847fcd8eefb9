#include "train/planner_options.hpp"

#include <string>

#include "core/error.hpp"
#include "train/train_options.hpp"

namespace mgt {

void validate_planner_options(const TrainOptions& o) {
  const PlannerOptions& p = o.planner;
  if (!o.dry_run) {
    if (p.world_size) throw UsageError("--world-size plans a layout: it needs --dry-run (a run takes its ranks from the launcher)");
    if (p.gpu) throw UsageError("--planner-gpu needs --dry-run");
    if (p.gpu_memory_gib) throw UsageError("--planner-gpu-memory needs --dry-run");
  }
  if (p.gpu_memory_gib && *p.gpu_memory_gib > 1 << 20)
    throw UsageError("--planner-gpu-memory is in GiB: at most 1048576");
}

int planned_world_size(const TrainOptions& o, int launched_size) {
  if (!o.planner.world_size) return launched_size;
  if (launched_size > 1 && *o.planner.world_size != launched_size)
    throw UsageError("--world-size (" + std::to_string(*o.planner.world_size) + ") differs from the launcher's " +
                     std::to_string(launched_size) + " ranks; leave it out under a launcher");
  if (*o.planner.world_size > 1 << 20) throw UsageError("--world-size must be at most 1048576, got " + std::to_string(*o.planner.world_size));
  return static_cast<int>(*o.planner.world_size);
}

}  // namespace mgt
