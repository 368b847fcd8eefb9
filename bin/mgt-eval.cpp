// mgt-eval: zero-shot evaluation of a GPT checkpoint as Megatron-LM's tasks/main.py does it
// (LAMBADA cloze accuracy, WikiText-103 perplexity).
// Flags → EvalOptions in lib/eval/eval_command_line; all the work is in lib/eval/eval_job.
#include <cstdio>

#include "core/program_main.hpp"
#include "eval/eval_command_line.hpp"
#include "eval/eval_job.hpp"

int main(int argc, char** argv) {
  return mgt::run_program("mgt-eval", argc, argv, [&]() -> int {
    const mgt::EvalCommandLine command = mgt::parse_eval_command_line(argc, argv);
    if (command.show_help) {
      std::fputs(mgt::eval_help().c_str(), stdout);
      return mgt::kExitOk;
    }
    mgt::print_ignored_flags("mgt-eval", command.ignored);
    return mgt::run_eval(command.options);
  });
}
