// Megatron-style command lines (argparse conventions) in front of cxxopts: "--flag value" and
// "--flag=value", flags taking several values ("--data-path 0.3 A 0.7 B"), and errors that
// tell a Megatron-LM flag the program does not support from a flag nobody knows.
// Shared by every program; core/cxxopts_command_line.hpp connects it to cxxopts.
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
  ManyAppending,  // as Many, but a repeated flag adds to the earlier values instead of replacing
};

struct CommandLineRules {
  std::map<std::string, FlagArity> known;  // "--name" -> arity
  // Flags refused with a reason (Megatron flags the program knows of but does not implement):
  // "--foo is not supported by PROGRAM: REASON".
  std::map<std::string, std::string> refused;
  // Whether an unknown flag that Megatron's pretraining parser has is named as such. Programs
  // standing for another Megatron script (mgt-tokenize: preprocess_data.py) turn it off.
  bool name_pretraining_flags = true;
};

// Rewrites argv as cxxopts wants it: one "--flag=value" per value, switches as they are.
// A repeated single-value flag keeps its last value (cxxopts does that); a repeated Many flag
// replaces the earlier values, as argparse does. Throws mgt::UsageError for a refused flag, an
// unknown flag ("--foo is a Megatron-LM flag that PROGRAM does not support" when Megatron's
// pretraining parser has it, "unknown flag --foo" otherwise), a missing value, a value given to a
// switch, or a positional argument. "-h" and "--help" pass through.
std::vector<std::string> normalize_command_line(int argc, const char* const* argv,
                                                const CommandLineRules& rules, std::string_view program);
// The same with `known` alone: nothing refused by name, pretraining flags named.
std::vector<std::string> normalize_command_line(int argc, const char* const* argv,
                                                const std::map<std::string, FlagArity>& known,
                                                std::string_view program);

// Numbers as argparse's type=int / type=float accept them, except that a real must be finite
// ("inf" and "nan" are refused); then checked against the flag's range in core/flag_ranges.hpp.
// Errors name the flag.
std::int64_t parse_integer_flag(std::string_view flag, std::string_view text);
double parse_real_flag(std::string_view flag, std::string_view text);

// `text` must be one of `choices`; the error lists them, like argparse's "invalid choice".
void check_choice(std::string_view flag, std::string_view text,
                  std::initializer_list<std::string_view> choices);

}  // namespace mgt
