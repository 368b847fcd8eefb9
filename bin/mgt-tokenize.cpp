// mgt-tokenize: Megatron's tools/preprocess_data.py (and tools/merge_datasets.py with --merge).
// Flags → TokenizeOptions in lib/data/tokenize_command_line; all the work is in
// lib/data/tokenize_job.
#include <csignal>
#include <cstdio>

#include "core/program_main.hpp"
#include "core/signal_flag.hpp"
#include "data/tokenize_command_line.hpp"
#include "data/tokenize_job.hpp"

int main(int argc, char** argv) {
  return mgt::run_program("mgt-tokenize", argc, argv, [&]() -> int {
    const mgt::TokenizeCommandLine command = mgt::parse_tokenize_command_line(argc, argv);
    if (command.show_help) {
      std::fputs(mgt::tokenize_help().c_str(), stdout);
      return mgt::kExitOk;
    }
    mgt::print_ignored_flags("mgt-tokenize", command.ignored);
    // The run stops at a safe point and removes its temporaries instead of dying and leaving
    // them behind; a second signal kills it should that hang.
    const mgt::SignalFlag interrupt({SIGINT, SIGTERM, SIGHUP}, {.leave_ignored = true, .repeat_kills = true});
    const mgt::TokenizeOptions& options = command.options;
    const mgt::TokenizeSummary summary = options.merge ? mgt::run_merge(options, &interrupt.flag())
                                                       : mgt::run_tokenize(options, &interrupt.flag());
    std::fprintf(stderr, "%s\n", mgt::summary_text(summary).c_str());
    std::printf("%s\n", mgt::summary_json(summary).c_str());
    std::fflush(stdout);
    return mgt::kExitOk;
  });
}
