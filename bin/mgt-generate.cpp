// mgt-generate: complete prompts with a checkpoint, greedy or sampled, with a key/value cache.
// Flags → GenerateOptions in lib/generate/generate_command_line; the work is in
// lib/generate/generate_job, or lib/generate/generation_server with --server.
#include <cstdio>

#include "core/program_main.hpp"
#include "generate/generate_command_line.hpp"
#include "generate/generate_job.hpp"
#include "generate/generation_server.hpp"

int main(int argc, char** argv) {
  return mgt::run_program("mgt-generate", argc, argv, [&]() -> int {
    const mgt::GenerateCommandLine command = mgt::parse_generate_command_line(argc, argv);
    if (command.show_help) {
      std::fputs(mgt::generate_help().c_str(), stdout);
      return mgt::kExitOk;
    }
    mgt::print_ignored_flags("mgt-generate", command.ignored);
    return command.options.server.enabled ? mgt::run_generation_server(command.options)
                                          : mgt::run_generate(command.options);
  });
}
