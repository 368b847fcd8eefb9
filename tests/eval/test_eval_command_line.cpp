#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../command_line_testing.hpp"
#include "eval/eval_command_line.hpp"

using namespace mgt;

namespace {

EvalCommandLine parse(const std::vector<std::string>& args) {
  return command_line_testing::parse_args(parse_eval_command_line, "mgt-eval", args);
}

std::string usage_error(const std::vector<std::string>& args) {
  return command_line_testing::usage_error_of(parse_eval_command_line, "mgt-eval", args);
}

const std::vector<std::string> kBase = {"--task", "LAMBADA", "--valid-data", "l.jsonl", "--load", "ckpt"};

std::vector<std::string> with(std::vector<std::string> extra) {
  std::vector<std::string> args = kBase;
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace

TEST_CASE("mgt-eval command line: defaults", "[eval]") {
  const EvalOptions o = parse(kBase).options;
  CHECK(o.task == ZeroShotTask::kLambada);
  CHECK(o.valid_data == "l.jsonl");
  CHECK(o.load == "ckpt");
  CHECK_FALSE(o.strict_lambada);
  CHECK(o.overlapping_eval == 32);
  CHECK(o.micro_batch_size == 8);
  CHECK_FALSE(o.seq_length.has_value());
  CHECK_FALSE(o.tokenizer.has_value());
  CHECK(o.log_interval == 100);
  CHECK(o.model_flags.empty());
  CHECK_FALSE(o.output.has_value());
  CHECK(parse({"--help"}).show_help);
}

TEST_CASE("mgt-eval command line: Megatron's flags", "[eval]") {
  const EvalOptions o =
      parse({"--task", "WIKITEXT103", "--valid-data", "w.tokens", "--load=ckpt", "--strict-lambada",
             "--overlapping-eval", "16", "--seq-length", "128", "--micro-batch-size", "2", "--tokenizer-type",
             "GPT2BPETokenizer", "--vocab-file", "v.json", "--merge-file", "m.txt", "--num-layers", "2",
             "--swiglu", "--tensor-model-parallel-size", "1", "--no-load-optim", "--no-load-rng", "--fp16",
             "--log-interval", "5", "--output", "r.json"})
          .options;
  CHECK(o.task == ZeroShotTask::kWikitext103);
  CHECK(o.strict_lambada);
  CHECK(o.overlapping_eval == 16);
  CHECK(o.seq_length == 128);
  CHECK(o.micro_batch_size == 2);
  REQUIRE(o.tokenizer.has_value());
  CHECK(o.tokenizer->type == "GPT2BPETokenizer");
  CHECK(o.tokenizer->merge_file == "m.txt");
  CHECK(o.model_flags == std::map<std::string, std::string>{{"num-layers", "2"}, {"swiglu", "true"}});
  CHECK(o.checkpoint_flags.precision == Precision::Fp16);
  CHECK(o.log_interval == 5);
  CHECK(o.output == "r.json");
  // A file flag alone still counts: it replaces the path recorded in the checkpoint.
  CHECK(parse(with({"--vocab-file", "v.json"})).options.tokenizer.has_value());
}

TEST_CASE("mgt-eval command line: refusals name the flag and the reason", "[eval]") {
  CHECK(usage_error({"--valid-data", "x", "--load", "c"}).find("--task is required") != std::string::npos);
  CHECK(usage_error({"--task", "LAMBADA", "--load", "c"}).find("--valid-data is required") != std::string::npos);
  CHECK(usage_error({"--task", "LAMBADA", "--valid-data", "x"}).find("--load is required") != std::string::npos);
  CHECK(usage_error({"--task", "RACE", "--valid-data", "x", "--load", "c"}).find("--task") != std::string::npos);
  CHECK(usage_error({"--task", "LAMBADA", "--valid-data", "a", "b", "--load", "c"}).find("one file") !=
        std::string::npos);
  CHECK(usage_error(with({"--overlapping-eval", "0"})).find("at least 1") != std::string::npos);
  CHECK(usage_error(with({"--micro-batch-size", "0"})).find("--micro-batch-size") != std::string::npos);
  CHECK(usage_error(with({"--seq-length", "x"})).find("--seq-length") != std::string::npos);
  CHECK(usage_error(with({"--tensor-model-parallel-size", "2"})).find("reads any checkpoint whole") != std::string::npos);
  CHECK(usage_error(with({"--epochs", "3"})).find("does not train") != std::string::npos);
  CHECK(usage_error(with({"--pretrained-checkpoint", "x"})).find("--load") != std::string::npos);
  CHECK(usage_error(with({"--bf16", "--fp16"})).find("mutually exclusive") != std::string::npos);
  CHECK(usage_error(with({"--lr", "0.1"})).find("Megatron-LM flag") != std::string::npos);
  CHECK(usage_error(with({"--no-such-flag"})).find("unknown flag --no-such-flag") != std::string::npos);
}
