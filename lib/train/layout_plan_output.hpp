// The layout plan (train/layout_planner.hpp) as --dry-run prints it: a table for people, best
// first, closed by "estimated step: S s" for the flags' own layout on a line of its own (for
// scripts that compare it with the training log), and a JSON value for programs.
#pragma once
#include <cstddef>
#include <iosfwd>

#include "data/python_json.hpp"
#include "train/layout_planner.hpp"

namespace mgt {

// At most this many rows in the table (the flags' own layout is shown beyond them); the JSON
// lists every fitting layout.
inline constexpr std::size_t kLayoutTableRows = 30;

void write_layout_plan_table(const LayoutPlan& plan, std::ostream& out);

// {"world_size", "gpu": {...}, "memory_margin", "considered", "refused_by_validation",
//  "beyond_memory", "layouts": [...], "given_layout": {...}, "notes": [...]}
PyValue layout_plan_json(const LayoutPlan& plan);

}  // namespace mgt
