// mgt-index: build Megatron's GPTDataset / BlendedDataset index caches (the .npy files that
// pretrain_gpt.py writes before training) ahead of time, byte for byte.
// Flags → IndexOptions in lib/data/index_command_line; all the work is in lib/data/index_job.
#include <cstdio>

#include "core/program_main.hpp"
#include "data/index_command_line.hpp"
#include "data/index_job.hpp"

int main(int argc, char** argv) {
  return mgt::run_program("mgt-index", argc, argv, [&]() -> int {
    const mgt::IndexCommandLine command = mgt::parse_index_command_line(argc, argv);
    if (command.show_help) {
      std::fputs(mgt::index_help().c_str(), stdout);
      return mgt::kExitOk;
    }
    mgt::print_ignored_flags("mgt-index", command.ignored);
    return mgt::run_index(command.options);
  });
}
