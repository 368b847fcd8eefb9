// The flags of Megatron-LM's pretraining parser (core_v0.13.0), compiled in from
// megatron_flags.inc, so that a program can say "this is a Megatron flag we do not support"
// instead of "unknown flag" — the difference between a missing feature and a typo.
#pragma once
#include <optional>
#include <span>
#include <string_view>

namespace mgt {

struct MegatronFlag {
  std::string_view name;     // "--num-layers"; aliases have their own entries
  std::string_view default_; // as Python's repr prints it: "None", "0.02", "'linear'", "False"
  std::string_view action;   // argparse action class: StoreAction, StoreTrueAction, ...
};

// All flags, sorted by name.
std::span<const MegatronFlag> megatron_flags();

// The entry of `name` ("--foo", without any "=value"), if Megatron's parser has it.
std::optional<MegatronFlag> find_megatron_flag(std::string_view name);

}  // namespace mgt
