// mgt-eval's command line: the flags of Megatron's tasks/main.py for the zero-shot GPT tasks
// (and the checkpoint, tokenizer and model-shape flags such a command line carries) into
// EvalOptions.
#pragma once
#include <string>
#include <vector>

#include "core/command_line.hpp"
#include "eval/eval_job.hpp"

namespace mgt {

struct EvalCommandLine {
  bool show_help = false;  // --help: print eval_help() and stop; nothing else is read
  EvalOptions options;
  std::vector<IgnoredFlagUse> ignored;  // Megatron flags accepted and ignored, for the start-up line
};

// Throws mgt::UsageError naming the flag at fault; Megatron flags that have no meaning for a
// zero-shot evaluation are refused with the reason.
EvalCommandLine parse_eval_command_line(int argc, const char* const* argv);

// The --help text.
std::string eval_help();

}  // namespace mgt
