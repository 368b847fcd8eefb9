// mgt-ckpt-convert's command line: Megatron's tools/checkpoint/convert.py flags (and the core
// loader's and saver's) into ConvertOptions.
#pragma once
#include <string>
#include <vector>

#include "core/command_line.hpp"

#include "ckpt/convert_job.hpp"

namespace mgt {

struct ConvertCommandLine {
  bool show_help = false;  // --help: print convert_help() and stop; nothing else is read
  ConvertOptions options;
  std::vector<IgnoredFlagUse> ignored;  // accepted flags that change nothing, for print_ignored_flags
};

// Throws mgt::UsageError naming the flag at fault.
ConvertCommandLine parse_convert_command_line(int argc, const char* const* argv);

// The --help text.
std::string convert_help();

}  // namespace mgt
