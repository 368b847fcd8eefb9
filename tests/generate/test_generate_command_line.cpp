// mgt-generate takes the checkpoint-reading flags of Megatron's generation scripts as mgt-eval
// does (ckpt/checkpoint_read_flags.hpp).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../command_line_testing.hpp"
#include "generate/generate_command_line.hpp"

using namespace mgt;

namespace {

GenerateCommandLine parse(std::vector<std::string> args) {
  args.insert(args.begin(), {"--load", "ckpt"});
  return command_line_testing::parse_args(parse_generate_command_line, "mgt-generate", args);
}

std::string usage_error(std::vector<std::string> args) {
  args.insert(args.begin(), {"--load", "ckpt"});
  return command_line_testing::usage_error_of(parse_generate_command_line, "mgt-generate", args);
}

}  // namespace

TEST_CASE("mgt-generate command line: Megatron's checkpoint-reading flags", "[generate]") {
  const GenerateOptions o =
      parse({"--no-load-optim", "--no-load-rng", "--use-checkpoint-args", "--tensor-model-parallel-size",
             "1", "--pipeline-model-parallel-size", "1", "--make-vocab-size-divisible-by", "128", "--bf16"})
          .options;
  CHECK(o.checkpoint_flags.make_vocab_size_divisible_by == 128);
  CHECK(o.checkpoint_flags.precision == Precision::Bf16);
  CHECK(usage_error({"--tensor-model-parallel-size", "2"}).find("reads any checkpoint whole") != std::string::npos);
  CHECK(usage_error({"--bf16", "--fp16"}).find("mutually exclusive") != std::string::npos);
  CHECK(usage_error({"--make-vocab-size-divisible-by", "0"}).find("--make-vocab-size-divisible-by must be") != std::string::npos);
}
