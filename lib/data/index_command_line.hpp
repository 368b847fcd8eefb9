// mgt-index's command line: pretrain_gpt.py's data flags (and a few of mgt's own) into
// IndexOptions.
#pragma once
#include <string>
#include <vector>

#include "core/command_line.hpp"
#include "core/flag_table.hpp"
#include "data/index_job.hpp"

namespace mgt {

struct IndexCommandLine {
  bool show_help = false;  // --help: print index_help() and stop; nothing else is read
  IndexOptions options;
  std::vector<IgnoredFlagUse> ignored;  // Megatron flags accepted and ignored, for the start-up line
};

// Throws mgt::UsageError naming the flag at fault; Megatron flags that matter for the indices but
// are not implemented are refused with the reason.
IndexCommandLine parse_index_command_line(int argc, const char* const* argv);

// The --help text.
std::string index_help();

// mgt-index's flags bound to `options` (core/flag_table.hpp): over default options they describe
// the defaults, which are mgt-train's for every flag the two share.
std::vector<FlagDefinition> index_flags(IndexOptions& options);

}  // namespace mgt
