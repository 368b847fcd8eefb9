// The definitions of Megatron's Mixture-of-Experts flags (model/moe_options.hpp), and the MoE
// flags of Megatron that mgt refuses by name, with the reason.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/flag_table.hpp"
#include "model/moe_options.hpp"

namespace mgt {

std::vector<FlagDefinition> moe_flags(MoeOptions& m);

// "--moe-enable-deepep" -> why mgt refuses it and what to do instead.
const std::map<std::string, std::string>& refused_moe_flags();

}  // namespace mgt
