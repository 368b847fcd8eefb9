// mgt-train --dry-run's layout planner: for the model and batch of the flags and a number of
// GPUs, the layouts (train/layout_candidates.hpp) that fit each GPU's memory
// (train/planner_target.hpp), ranked by the cost model's step time (train/step_cost_model.hpp),
// and the estimate of the layout the flags give. Printed by train/layout_plan_output.hpp.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "model/memory_estimate.hpp"
#include "train/layout_candidates.hpp"
#include "train/planner_target.hpp"
#include "train/step_cost_model.hpp"
#include "train/train_options.hpp"

namespace mgt {

struct PlannedLayout {
  LayoutChoice layout;
  MemoryEstimate memory;
  StepEstimate step;
  bool fits = false;   // memory.total_bytes within the target's budget
  bool given = false;  // the layout of the flags given
};

struct LayoutPlan {
  int world_size = 1;
  PlannerTarget target;
  std::vector<PlannedLayout> fitting;  // best (shortest estimated step) first
  std::int64_t considered = 0;  // layouts enumerated
  std::int64_t refused = 0;     // by mgt-train's validation
  std::int64_t too_large = 0;   // accepted, beyond the memory budget
  PlannedLayout given;          // the flags' layout, fitting or not
  bool experts = false;         // a mixture of experts: the layouts have an expert-parallel size
  std::vector<std::string> notes;  // what the estimates assume beyond the flags
};

// `unvalidated`: the flags as parsed; `validated`: the same validated for `world_size`;
// `vocab_size`: the tokenizer's (padded per layout as the trainer pads it).
LayoutPlan plan_layouts(const TrainOptions& unvalidated, const TrainOptions& validated, int world_size,
                        std::int64_t vocab_size, const PlannerTarget& target);

// Whether --dry-run plans layouts: with --world-size, or under a launcher (`launched`) for a GPU
// run (--device cuda, or auto with a GPU visible). CPU ranks are not planned; `why_not` then says
// so.
bool wants_layout_plan(const TrainOptions& validated, bool launched, bool gpu_visible, std::string* why_not);

// --dry-run's plan when wants_layout_plan: the GPU of --device queried (the target), the
// tokenizer built for its vocabulary; nullopt (and a line on `err` saying why, if there is one)
// when none is wanted.
std::optional<LayoutPlan> dry_run_layout_plan(const TrainOptions& unvalidated, const TrainOptions& validated,
                                              int world_size, bool launched, std::ostream& err);

}  // namespace mgt
