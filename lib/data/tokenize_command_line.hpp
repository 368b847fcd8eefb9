// mgt-tokenize's command line: preprocess_data.py's flags (merge_datasets.py's with --merge, and a
// few of mgt's own) into TokenizeOptions.
#pragma once
#include <string>
#include <vector>

#include "core/command_line.hpp"
#include "core/flag_table.hpp"

#include "data/tokenize_job.hpp"

namespace mgt {

struct TokenizeCommandLine {
  bool show_help = false;  // --help: print tokenize_help() and stop; nothing else is read
  TokenizeOptions options;
  std::vector<IgnoredFlagUse> ignored;  // older preprocess_data.py flags accepted, for the start-up line
};

// Throws mgt::UsageError naming the flag at fault; preprocess_data.py flags that are not
// implemented are refused with the reason. A flag may be abbreviated as argparse allows
// (core/command_line.hpp). Checks only the flags themselves: what needs the
// options as a whole is validate_tokenize_options's job.
TokenizeCommandLine parse_tokenize_command_line(int argc, const char* const* argv);

// The --help text.
std::string tokenize_help();

// mgt-tokenize's flags bound to `options` (core/flag_table.hpp).
std::vector<FlagDefinition> tokenize_flags(TokenizeOptions& options);

}  // namespace mgt
