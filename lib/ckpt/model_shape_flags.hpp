// The model-shape flags of pretrain_gpt.py, accepted by the programs that read the architecture
// from a checkpoint (mgt-eval, mgt-generate), so that a Megatron command line repeating them still
// works; check_model_flags_agree then refuses any that disagree with the checkpoint.
#pragma once
#include <map>
#include <string>

#include "core/cxxopts_command_line.hpp"

namespace mgt {

// Declares them in the group "model (read from the checkpoint)".
void add_model_shape_flags(cxxopts::Options& options);

// The ones given, name without "--" → value as typed ("true" for switches).
std::map<std::string, std::string> given_model_shape_flags(const cxxopts::ParseResult& result);

}  // namespace mgt
