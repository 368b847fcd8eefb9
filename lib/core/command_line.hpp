// Megatron-style command lines (argparse conventions) in front of cxxopts: "--flag value" and
// "--flag=value", flags taking several values ("--data-path 0.3 A 0.7 B"), errors that tell a
// Megatron-LM flag the program does not support from a flag nobody knows, and Megatron flags
// accepted only to be ignored. Every refused or unknown flag of a command line is reported at
// once, so that porting a long launch script takes one round, not one per flag.
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

// A Megatron flag a program accepts and ignores because it only tunes how Megatron's Python runs
// (worker processes, garbage collection, kernel fusion): mgt's results are the same without it.
// Its value is still checked as argparse would, and a value whose meaning mgt cannot honour is
// refused with the reason.
struct IgnoredFlag {
  FlagArity arity = FlagArity::None;
  std::string reason;                                 // why ignoring it changes nothing
  std::vector<std::string> choices;                   // argparse's choices; empty: any value
  bool integer = false;                               // argparse type=int
  std::map<std::string, std::string> refused_values;  // value -> why mgt cannot stand for it
  bool real = false;                                  // argparse type=float
};

// One ignored flag as given on a command line.
struct IgnoredFlagUse {
  std::string flag;   // "--num-workers"
  std::string value;  // "8"; empty for a switch
  std::string reason;
};

struct CommandLineRules {
  std::map<std::string, FlagArity> known;  // "--name" -> arity
  // Flags refused with a reason (Megatron flags the program knows of but does not implement):
  // "--foo is not supported by PROGRAM: REASON".
  std::map<std::string, std::string> refused;
  // Whether an unknown flag that Megatron's pretraining parser has is named as such. Programs
  // standing for another Megatron script (mgt-tokenize: preprocess_data.py) turn it off.
  bool name_pretraining_flags = true;
  // Flags accepted and ignored; `known` and `refused` take precedence.
  std::map<std::string, IgnoredFlag> ignored = {};
  // A program that does one step of what Megatron's pretraining script does (mgt-index builds its
  // dataset indices) takes the script's whole command line: every other flag of the pretraining
  // parser is accepted and ignored with this reason. Empty: such flags are refused by name.
  std::string other_pretraining_flags_ignored_because = {};
  // argparse's allow_abbrev: a unique prefix of a flag (known, refused, ignored or --help) stands
  // for it ("--vocab-f" for "--vocab-file"), and a prefix of several is refused as argparse
  // refuses it ("ambiguous option: --tok could match --tokenizer-model, --tokenizer-type"). Megatron's
  // pretraining parser sets allow_abbrev=False; its scripts' parsers (preprocess_data.py) keep
  // argparse's default, True.
  bool allow_abbreviations = false;
  // Flags that take a prefix that newer flags share: those of the parser the scripts that
  // abbreviated were written for, where the prefix was unique. A prefix that matches several
  // flags, exactly one of them listed here, stands for that one.
  std::vector<std::string> abbreviation_precedence = {};
};

struct NormalizedCommandLine {
  std::vector<std::string> args;        // argv for cxxopts
  std::vector<IgnoredFlagUse> ignored;  // in command-line order, each flag once (its last value)
};

// Rewrites argv as cxxopts wants it: one "--flag=value" per value, switches as they are; ignored
// flags are taken out. A repeated single-value flag keeps its last value (cxxopts does that); a
// repeated Many flag replaces the earlier values, as argparse does. Throws one mgt::UsageError
// listing, one per line in command-line order, every refused flag, unknown flag ("--foo is a
// Megatron-LM flag that PROGRAM does not support" when Megatron's pretraining parser has it,
// "unknown flag --foo" otherwise), missing value, value given to a switch, bad value of an
// ignored flag and positional argument. "-h" and "--help" pass through.
NormalizedCommandLine normalize_command_line(int argc, const char* const* argv, const CommandLineRules& rules,
                                             std::string_view program);
// The same with `known` alone: nothing refused by name or ignored, pretraining flags named.
NormalizedCommandLine normalize_command_line(int argc, const char* const* argv,
                                             const std::map<std::string, FlagArity>& known, std::string_view program);

// The start-up line that names the ignored flags and why each changes nothing, "" when none:
// "PROGRAM: ignored flags (they change nothing here): --num-workers 8 (REASON); --use-flash-attn (REASON)".
std::string ignored_flags_line(std::string_view program, const std::vector<IgnoredFlagUse>& ignored);

// Numbers as argparse's type=int / type=float accept them, except that a real must be finite
// ("inf" and "nan" are refused); then checked against the flag's range in core/flag_ranges.hpp.
// Errors name the flag.
std::int64_t parse_integer_flag(std::string_view flag, std::string_view text);
double parse_real_flag(std::string_view flag, std::string_view text);

// `text` must be one of `choices`; the error lists them, like argparse's "invalid choice".
void check_choice(std::string_view flag, std::string_view text,
                  std::initializer_list<std::string_view> choices);

}  // namespace mgt
