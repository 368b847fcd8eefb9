// The model-shape flags of pretrain_gpt.py, accepted by the programs that read the architecture
// from a checkpoint (mgt-eval, mgt-generate), so that a Megatron command line repeating them still
// works; check_model_flags_agree then refuses any that disagree with the checkpoint. They are
// mgt-train's own definitions (model/model_flags.hpp), read and checked the same way, described
// as what the checkpoint must have, and never required.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/flag_table.hpp"
#include "model/model_shape_options.hpp"

namespace mgt {

// Their --help group.
constexpr const char* kCheckpointModelGroup = "model (read from the checkpoint; given ones must agree)";

// The shape flags a checkpoint records, parsed into `parsed` (which, like `given`, must outlive
// the table); each one given is also recorded in `given`, name without "--" -> value as typed
// ("true" for a switch).
std::vector<FlagDefinition> checkpoint_model_flags(ModelShapeOptions& parsed, std::map<std::string, std::string>& given);

}  // namespace mgt
