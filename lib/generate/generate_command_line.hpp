// mgt-generate's command line: Megatron's text-generation settings (tokens_to_generate,
// temperature, top_k, top_p, ...) as flags, plus the checkpoint and the prompt and completion
// files.
#pragma once
#include <string>
#include <vector>

#include "core/command_line.hpp"
#include "generate/generate_job.hpp"

namespace mgt {

struct GenerateCommandLine {
  bool show_help = false;
  GenerateOptions options;
  std::vector<IgnoredFlagUse> ignored;  // Megatron flags accepted and ignored, for the start-up line
};

// Throws mgt::UsageError naming the flag at fault.
GenerateCommandLine parse_generate_command_line(int argc, const char* const* argv);

std::string generate_help();

}  // namespace mgt
