// mgt-eval's flag table (eval/eval_flags.hpp): --help lists every flag, the defaults are
// Megatron's (tasks/main.py), and the flags mgt-eval shares with mgt-train and mgt-generate are
// one definition each.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "../command_line_testing.hpp"
#include "eval/eval_command_line.hpp"
#include "eval/eval_flags.hpp"
#include "generate/generate_flags.hpp"
#include "train/train_flags.hpp"

using namespace mgt;

namespace {

std::string usage_error(std::vector<std::string> args) {
  args.insert(args.begin(), {"--task", "LAMBADA", "--valid-data", "l.jsonl", "--load", "ckpt"});
  return command_line_testing::usage_error_of(parse_eval_command_line, "mgt-eval", args);
}

std::map<std::string, std::string> descriptions(const std::vector<FlagDefinition>& flags) {
  std::map<std::string, std::string> described;
  for (const FlagDefinition& flag : flags) described[flag.name()] = flag.help();
  return described;
}

}  // namespace

TEST_CASE("eval flags: --help lists every flag as its definition describes it", "[eval]") {
  const std::string help = eval_help();
  EvalFlagFields fields;
  for (const FlagDefinition& flag : eval_flags(fields)) {
    INFO(flag.flag());
    CHECK(help.find("--" + flag.name() + (flag.arity() == FlagArity::None ? "" : " " + flag.metavar())) !=
          std::string::npos);
    CHECK(help.find(flag.help().substr(0, 20)) != std::string::npos);
    CHECK((flag.help().find("(required)") != std::string::npos) == flag.is_required());
  }
  for (const char* flag : {"-h, --help", "--version"}) CHECK(help.find(flag) != std::string::npos);
}

TEST_CASE("eval flags: defaults are Megatron's", "[eval]") {
  EvalFlagFields fields;
  const auto described = descriptions(eval_flags(fields));
  CHECK(described.at("overlapping-eval").find("(default: 32)") != std::string::npos);
  CHECK(described.at("log-interval").find("(default: 100)") != std::string::npos);
  CHECK(described.at("tiktoken-num-special-tokens").find("(default: 1000)") != std::string::npos);
  CHECK(described.at("device").find("(default: auto)") != std::string::npos);
  // Read from the checkpoint unless given: no default of their own.
  for (const char* flag : {"num-layers", "hidden-size", "seq-length", "tokenizer-type"})
    CHECK(described.at(flag).find("(default: ") == described.at(flag).rfind("(default: the"));
}

TEST_CASE("eval flags: one definition per flag shared with mgt-train and mgt-generate", "[eval]") {
  EvalFlagFields eval_fields;
  GenerateFlagFields generate_fields;
  TrainOptions train_options;
  const auto eval = descriptions(eval_flags(eval_fields));
  const auto generate = descriptions(generate_flags(generate_fields));
  const auto train = descriptions(train_flags(train_options));
  for (const char* flag : {"device", "bf16", "fp16", "vocab-size", "vocab-extra-ids", "tokenizer-model",
                           "tiktoken-pattern", "tiktoken-special-tokens"}) {
    INFO(flag);
    CHECK(eval.at(flag) == train.at(flag));
    CHECK(eval.at(flag) == generate.at(flag));
  }
  // Every eval and generate flag means the same in both programs except those of one program.
  for (const auto& [flag, help] : eval)
    if (generate.count(flag) && flag != "micro-batch-size" && flag != "seq-length" && flag != "output" &&
        flag != "log-interval") {
      INFO(flag);
      CHECK(help == generate.at(flag));
    }
  // The model-shape flags are mgt-train's, described as what the checkpoint must have.
  CHECK(eval.at("num-layers") == "Transformer layers, as the checkpoint has it");
  CHECK(train.at("num-layers") == "Transformer layers (required)");
}

TEST_CASE("eval flags: usage errors are one line naming the flag", "[eval]") {
  for (const auto& [args, named] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--no-such-flag"}, "unknown flag --no-such-flag"},
           {{"--overlapping-eval", "x"}, "--overlapping-eval"},
           {{"--log-interval", "0"}, "--log-interval must be at least 1"},
           {{"--num-layers", "0"}, "--num-layers must be between 1 and"},
           {{"--norm-epsilon", "nan"}, "--norm-epsilon"},
           {{"--position-embedding-type", "mrope"}, "--position-embedding-type mrope is not supported by mgt-eval"},
           {{"--normalization", "BatchNorm"}, "--normalization: invalid choice 'BatchNorm'"},
           {{"--vocab-size", "0"}, "--vocab-size must be"},
           {{"--tiktoken-num-special-tokens", "-1"}, "--tiktoken-num-special-tokens must be"},
           {{"--make-vocab-size-divisible-by", "0"}, "--make-vocab-size-divisible-by must be"},
           {{"--pipeline-model-parallel-size", "2"}, "--pipeline-model-parallel-size 2: mgt-eval runs on one rank"},
           {{"--swiglu=1"}, "--swiglu"},
       }) {
    const std::string error = usage_error(args);
    INFO(args.front() << ": " << error);
    CHECK(error.find(named) != std::string::npos);
    CHECK(error.find('\n') == std::string::npos);
  }
}

TEST_CASE("eval flags: model-shape and tokenizer flags reach the options as given", "[eval]") {
  const EvalOptions o = command_line_testing::parse_args(
                            parse_eval_command_line, "mgt-eval",
                            {"--task", "LAMBADA", "--valid-data", "l", "--load", "c", "--norm-epsilon", "1e-6",
                             "--disable-bias-linear", "--tiktoken-special-tokens", "<unk>", "<s>", "</s>",
                             "--make-vocab-size-divisible-by", "64"})
                            .options;
  CHECK(o.model_flags == std::map<std::string, std::string>{{"norm-epsilon", "1e-6"}, {"disable-bias-linear", "true"}});
  REQUIRE(o.tokenizer.has_value());
  CHECK(o.tokenizer->tiktoken_special_tokens == std::vector<std::string>{"<unk>", "<s>", "</s>"});
  CHECK(o.tokenizer->tiktoken_num_special_tokens == 1000);
  CHECK(o.checkpoint_flags.make_vocab_size_divisible_by == 64);
}
