// mgt-generate's flag table (generate/generate_flags.hpp): --help lists every flag, the defaults
// are Megatron's (tools/run_text_generation_server.py), and usage errors name the flag.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "../command_line_testing.hpp"
#include "generate/generate_command_line.hpp"
#include "generate/generate_flags.hpp"

using namespace mgt;

namespace {

GenerateOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), {"--load", "ckpt"});
  return command_line_testing::parse_args(parse_generate_command_line, "mgt-generate", args).options;
}

std::string usage_error(std::vector<std::string> args) {
  args.insert(args.begin(), {"--load", "ckpt"});
  return command_line_testing::usage_error_of(parse_generate_command_line, "mgt-generate", args);
}

}  // namespace

TEST_CASE("generate flags: --help lists every flag as its definition describes it", "[generate]") {
  const std::string help = generate_help();
  GenerateFlagFields fields;
  for (const FlagDefinition& flag : generate_flags(fields)) {
    INFO(flag.flag());
    CHECK(help.find("--" + flag.name() + (flag.arity() == FlagArity::None ? "" : " " + flag.metavar())) !=
          std::string::npos);
    CHECK((flag.help().find("(required)") != std::string::npos) == flag.is_required());
  }
  for (const char* flag : {"-h, --help", "--version"}) CHECK(help.find(flag) != std::string::npos);
}

TEST_CASE("generate flags: defaults are Megatron's", "[generate]") {
  const GenerateOptions o = parse({});
  CHECK(o.server.port == 5000);
  CHECK(o.generation.sampling.temperature == 1.0);
  CHECK(o.generation.sampling.top_k == 1);
  CHECK(o.generation.sampling.top_p == 0.0);
  CHECK(o.generation.max_new_tokens == 30);
  CHECK(o.generation.seed == 1234);
  CHECK(o.log_interval == 100);
  CHECK(o.micro_batch_size == 8);
  CHECK(o.device == "auto");
  CHECK_FALSE(o.tokenizer.has_value());
  CHECK(o.model_flags.empty());
  CHECK(o.checkpoint_flags.precision == Precision::Fp32);
  CHECK_FALSE(o.seq_length.has_value());
}

TEST_CASE("generate flags: Megatron's spellings set the same settings", "[generate]") {
  const GenerateOptions o = parse({"--num-tokens-to-generate", "7", "--top_k", "0", "--top_p", "0.9", "--seed", "5",
                                   "--stop", "a", "--stop", "b", "--return-log-probs", "--vocab-file", "v.json"});
  CHECK(o.generation.max_new_tokens == 7);
  CHECK(o.generation.sampling.top_k == 0);
  CHECK(o.generation.sampling.top_p == 0.9);
  CHECK(o.generation.seed == 5);
  CHECK(o.generation.stop_strings == std::vector<std::string>{"a", "b"});
  CHECK(o.generation.return_log_probs);
  REQUIRE(o.tokenizer.has_value());
  CHECK(o.tokenizer->vocab_file == "v.json");
  const GenerateOptions served = parse({"--server", "--port", "0", "--host", "0.0.0.0"});
  CHECK(served.server.enabled);
  CHECK(served.server.port == 0);
  CHECK(served.server.host == "0.0.0.0");
}

TEST_CASE("generate flags: usage errors are one line naming the flag", "[generate]") {
  CHECK(command_line_testing::usage_error_of(parse_generate_command_line, "mgt-generate", {}) ==
        "--load is required: the checkpoint to generate with");
  for (const auto& [args, named] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--no-such-flag"}, "unknown flag --no-such-flag"},
           {{"--temperature", "0"}, "--temperature must be in (0, 100]"},
           {{"--top-k", "x"}, "--top-k"},
           {{"--top-p", "1.5"}, "--top-p must be in [0, 1]"},
           {{"--seed", "-1"}, "--seed must be between 0 and"},
           {{"--max-new-tokens", "-1"}, "--max-new-tokens must be"},
           {{"--inference-max-seq-length", "0"}, "--inference-max-seq-length must be >= 1"},
           {{"--port", "1"}, "--port needs --server"},
           {{"--server", "--port", "70000"}, "--port must be in [0, 65535]"},
           {{"--server", "--temperature", "0.5"}, "--temperature does not apply with --server"},
           {{"--hidden-size", "x"}, "--hidden-size"},
           {{"--tensor-model-parallel-size", "2"}, "--tensor-model-parallel-size 2: mgt-generate runs on one rank"},
           {{"--stop", "a", ""}, "--stop: an empty text stops nothing"},
       }) {
    const std::string error = usage_error(args);
    INFO(args.front() << ": " << error);
    CHECK(error.find(named) != std::string::npos);
    CHECK(error.find('\n') == std::string::npos);
  }
}
