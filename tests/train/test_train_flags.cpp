// mgt-train's flag table against what is derived from it. That the man page lists every flag is
// e2e.help_man_agreement's check: --help lists every flag of the table (below), and that test
// finds each flag of --help in man/man1/mgt-train.1.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "train/run_description.hpp"
#include "train/train_flags.hpp"
#include "train/train_options.hpp"

using namespace mgt;

namespace {

TrainOptions parse(std::vector<std::string> args) {
  args.insert(args.begin(), "mgt-train");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_train_options(static_cast<int>(argv.size()), argv.data());
}

const std::vector<std::string> kMinimal = {
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
    "--max-position-embeddings", "64", "--micro-batch-size", "2", "--lr", "1e-3", "--train-iters", "10",
    "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "100"};

// The top-level keys of json.dumps(indent=4) output, in order.
std::vector<std::string> top_level_keys(const std::string& json) {
  std::vector<std::string> keys;
  std::size_t at = 0;
  while ((at = json.find("\n    \"", at)) != std::string::npos) {
    at += 6;
    keys.push_back(json.substr(at, json.find('"', at) - at));
  }
  return keys;
}

}  // namespace

TEST_CASE("train flags: one definition per flag", "[train]") {
  TrainOptions o;
  std::set<std::string> names;
  for (const FlagDefinition& flag : train_flags(o)) {
    INFO(flag.flag());
    CHECK(names.insert(flag.name()).second);
    CHECK_FALSE(flag.group().empty());
    CHECK_FALSE(flag.help().empty());
    CHECK((flag.arity() == FlagArity::None) == flag.metavar().empty());
  }
}

TEST_CASE("train flags: every flag is in the run description, or says why not", "[train]") {
  TrainOptions o = parse(kMinimal);
  const std::vector<std::string> keys = top_level_keys(train_args_json(o, 128));
  const std::set<std::string> recorded(keys.begin(), keys.end());
  CHECK(recorded.size() == keys.size());  // no key written twice
  std::set<std::string> flag_keys;
  for (const FlagDefinition& flag : train_flags(o)) {
    INFO(flag.flag());
    if (flag.record_key().empty()) {
      CHECK_FALSE(flag.not_recorded_reason().empty());
      continue;
    }
    CHECK(flag_keys.insert(flag.record_key()).second);  // two flags, one key: one says not_recorded
    CHECK(recorded.count(flag.record_key()) == 1);
  }
  // What the description holds beyond the flags, each derived or fixed in run_description.cpp.
  std::set<std::string> derived;
  for (const std::string& key : keys)
    if (!flag_keys.count(key)) derived.insert(key);
  CHECK(derived ==
        std::set<std::string>{"padded_vocab_size", "params_dtype", "ckpt_format", "world_size", "data_parallel_size"});
}

TEST_CASE("train flags: the run description holds the values after validation", "[train]") {
  std::vector<std::string> args = kMinimal;
  args.insert(args.end(), {"--swiglu", "--disable-bias-linear", "--bf16", "--profile-ranks", "0", "1",
                           "--tensorboard-dir", "tb", "--no-log-loss-scale-to-tensorboard", "--global-batch-size", "8", "--rampup-batch-size",
                           "2", "2", "8"});
  // --rampup-batch-size needs a sample-based run.
  args.erase(std::find(args.begin(), args.end(), "--train-iters"), std::find(args.begin(), args.end(), "--train-iters") + 2);
  args.insert(args.end(), {"--train-samples", "100"});
  const std::string json = train_args_json(parse(args), 128);
  for (const char* line : {"\"ffn_hidden_size\": 128,", "\"add_bias_linear\": false,", "\"bias_gelu_fusion\": false,",
                           "\"num_query_groups\": 4,", "\"bf16\": true,", "\"fp16\": false,",
                           "\"params_dtype\": \"bf16\",", "\"tensorboard_dir\": \"tb\",",
                           "\"log_loss_scale_to_tensorboard\": false,", "\"split\": null,", "\"vocab_file\": null,",
                           "\"global_batch_size\": 8,", "\"start_weight_decay\": 0.01,"})
    CHECK(json.find(line) != std::string::npos);
  CHECK(json.find("\"profile_ranks\": [\n        0,\n        1\n    ],") != std::string::npos);
  CHECK(json.find("\"rampup_batch_size\": [\n        \"2\",\n        \"2\",\n        \"8\"\n    ],") !=
        std::string::npos);
}

TEST_CASE("train flags: --help lists every flag as its definition describes it", "[train]") {
  const std::string help = train_options_help();
  TrainOptions o;
  for (const FlagDefinition& flag : train_flags(o)) {
    INFO(flag.flag());
    CHECK(help.find("--" + flag.name() + (flag.arity() == FlagArity::None ? "" : " " + flag.metavar())) !=
          std::string::npos);
    // The description names what the flag accepts.
    for (const std::string& choice : flag.supported_choices()) CHECK(flag.help().find(choice) != std::string::npos);
    CHECK((flag.help().find("(required)") != std::string::npos) == flag.is_required());
  }
  // Written from the fields' own defaults, with mgt's own flags marked.
  std::map<std::string, std::string> described;
  for (const FlagDefinition& flag : train_flags(o)) described[flag.name()] = flag.help();
  CHECK(described["norm-epsilon"] == "Norm epsilon (default: 1e-05)");
  CHECK(described["seed"] == "Random seed (default: 1234)");
  CHECK(described["profile-ranks"] == "The ranks that --profile profiles (default: 0)");
  CHECK(described["num-layers"] == "Transformer layers (required)");
  CHECK(described["split"] == "Train, valid, test proportions (default: \"969, 30, 1\")");
  CHECK(described["device"] == "mgt: compute device: auto (a GPU when one is visible), cpu, cuda or cuda:N (default: auto)");
  CHECK(described["swiglu"] == "SwiGLU MLP");
}
