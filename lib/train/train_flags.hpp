// mgt-train's flags, each defined once (core/flag_table.hpp): parsing, --help, the per-flag checks
// and the run description stored in checkpoints (train/run_description.hpp) all read this table.
// --help and --version, which every program answers before parsing, are not in it.
#pragma once
#include <vector>

#include "core/flag_table.hpp"
#include "train/train_options.hpp"

namespace mgt {

// The table bound to `options`: over a default-constructed TrainOptions it describes the
// defaults, over a parsed one it holds the run's values. It refers to `options`, which must
// outlive it.
std::vector<FlagDefinition> train_flags(TrainOptions& options);

}  // namespace mgt
