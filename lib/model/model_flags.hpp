// The flags of Megatron's pretraining parser that shape the model, each defined once
// (core/flag_table.hpp): mgt-train reads them all; mgt-eval and mgt-generate accept the ones a
// checkpoint records, to check them against it (ckpt/model_shape_flags.hpp).
#pragma once
#include <vector>

#include "core/flag_table.hpp"
#include "model/model_shape_options.hpp"

namespace mgt {

// The entries bound to `options`, in --help order, without a group (the caller's table gives it).
std::vector<FlagDefinition> model_flags(ModelShapeOptions& options);

}  // namespace mgt
