// Megatron-style command lines (argparse conventions) in front of cxxopts: "--flag value" and
// "--flag=value", flags taking several values ("--data-path 0.3 A 0.7 B"), and errors that
// tell a Megatron-LM flag the program does not support from a flag nobody knows.
// Nothing here is specific to training; other programs can move to it.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace mgt {

enum class FlagArity {
  None,  // a switch: --swiglu
  One,   // --lr 3e-4 or --lr=3e-4
  Many,  // argparse nargs='*': values up to the next argument starting with '-'
};

// Rewrites argv as cxxopts wants it: one "--flag=value" per value, switches as they are.
// A repeated single-value flag keeps its last value (cxxopts does that); a repeated multi-value
// flag replaces the earlier values, as argparse does. Throws mgt::UsageError for an unknown flag
// ("--foo is a Megatron-LM flag that PROGRAM does not support" when Megatron's pretraining parser
// has it, "unknown flag --foo" otherwise), a missing value, a value given to a switch, or a
// positional argument. "-h" and "--help" pass through.
std::vector<std::string> normalize_command_line(int argc, const char* const* argv,
                                                const std::map<std::string, FlagArity>& known,
                                                std::string_view program);

// Numbers as argparse's type=int / type=float accept them; errors name the flag.
std::int64_t parse_integer_flag(std::string_view flag, std::string_view text);
double parse_real_flag(std::string_view flag, std::string_view text);

// `text` must be one of `choices`; the error lists them, like argparse's "invalid choice".
void check_choice(std::string_view flag, std::string_view text,
                  std::initializer_list<std::string_view> choices);

}  // namespace mgt
