// mgt-ckpt-convert: Megatron-LM's tools/checkpoint/convert.py for mgt — mgt checkpoints to and
// from Hugging Face GPT-2, Llama and Mistral (config.json + safetensors).
// Flags → ConvertOptions in lib/ckpt/convert_command_line; the work is in lib/ckpt/convert_job.
#include <cstdio>

#include "ckpt/convert_command_line.hpp"
#include "ckpt/convert_job.hpp"
#include "core/program_main.hpp"

int main(int argc, char** argv) {
  return mgt::run_program("mgt-ckpt-convert", argc, argv, [&]() -> int {
    const mgt::ConvertCommandLine command = mgt::parse_convert_command_line(argc, argv);
    if (command.show_help) {
      std::fputs(mgt::convert_help().c_str(), stdout);
      return mgt::kExitOk;
    }
    mgt::print_ignored_flags("mgt-ckpt-convert", command.ignored);
    const mgt::ConvertResult result = mgt::convert_checkpoint(command.options);
    std::fputs(mgt::convert_summary_json(command.options, result).c_str(), stdout);
    return mgt::kExitOk;
  });
}
