// mgt-tokenize's command line: preprocess_data.py's flags (merge_datasets.py's with --merge, and a
// few of mgt's own) into TokenizeOptions.
#pragma once
#include <string>

#include "data/tokenize_job.hpp"

namespace mgt {

struct TokenizeCommandLine {
  bool show_help = false;  // --help: print tokenize_help() and stop; nothing else is read
  TokenizeOptions options;
};

// Throws mgt::UsageError naming the flag at fault; preprocess_data.py flags that are not
// implemented are refused with the reason. Checks only the flags themselves: what needs the
// options as a whole is validate_tokenize_options's job.
TokenizeCommandLine parse_tokenize_command_line(int argc, const char* const* argv);

// The --help text.
std::string tokenize_help();

}  // namespace mgt
