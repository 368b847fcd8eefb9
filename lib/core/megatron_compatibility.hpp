// The Megatron-LM flags that every program taking Megatron's pretraining flags treats alike, so
// that a launch script ports unchanged: flags that only tune how Megatron's Python runs are
// accepted and ignored (named on one start-up line), flags that need a GPU feature mgt lacks are
// refused saying so and what to do, and renamed flags are refused with the names of their
// successors, as Megatron's own validate_args refuses them.
#pragma once
#include <map>
#include <span>
#include <string>

#include "core/command_line.hpp"
#include "core/flag_table.hpp"

namespace mgt {

// "--num-workers" -> how it is accepted and why ignoring it changes nothing.
const std::map<std::string, IgnoredFlag>& python_runtime_flags();

struct RenamedFlag {
  const char* name;       // "--batch-size"
  const char* successor;  // the flag that replaced it: "--micro-batch-size"
  const char* advice;     // the refusal's reason
};

// Megatron's retired flag names (megatron/training/arguments.py validate_args asserts on them).
std::span<const RenamedFlag> renamed_megatron_flags();

// "--fp8-format" -> the GPU feature the flag needs, which mgt lacks, and what to do instead.
const std::map<std::string, std::string>& gpu_feature_flags();

// Adds to `rules` the runtime flags that the program neither takes nor refuses itself, refuses the
// flags that need a GPU feature mgt lacks (gpu_feature_flags), and refuses each renamed flag
// whose successor the program takes.
void add_megatron_compatibility_flags(CommandLineRules& rules);

// The rules of a program whose flags are all in `flags` (its flag table): those flags and
// --version known, `refused` refused, then the compatibility flags above.
CommandLineRules table_command_line_rules(std::span<const FlagDefinition> flags,
                                          std::map<std::string, std::string> refused);

// The --help paragraph naming the flags `rules` accepts and ignores; "" when none.
std::string ignored_flags_help(const CommandLineRules& rules);

}  // namespace mgt
