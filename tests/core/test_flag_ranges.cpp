// Every numeric flag of every program is checked for finiteness and range where it is parsed,
// with a message naming the flag itself.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "ckpt/convert_command_line.hpp"
#include "ckpt/hf_gpt2_config.hpp"
#include "core/command_line.hpp"
#include "core/error.hpp"
#include "core/flag_ranges.hpp"
#include "core/megatron_flags.hpp"
#include "data/index_command_line.hpp"
#include "data/tokenize_command_line.hpp"
#include "eval/eval_command_line.hpp"
#include "generate/generate_command_line.hpp"
#include "train/train_options.hpp"

using namespace mgt;

namespace {

using Args = std::vector<std::string>;

template <class Parse>
std::string usage_error(Parse parse, const char* program, Args args) {
  args.insert(args.begin(), program);
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    parse(static_cast<int>(argv.size()), argv.data());
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitUsage);
    return e.what();
  }
  return "";
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const Args kTrain = {"--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
                     "--max-position-embeddings", "64", "--micro-batch-size", "2", "--train-iters", "10",
                     "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "100"};

std::string train_error(Args extra) {
  Args args = kTrain;
  args.insert(args.end(), extra.begin(), extra.end());
  return usage_error([](int c, const char* const* v) { return parse_train_options(c, v); }, "mgt-train", args);
}

}  // namespace

TEST_CASE("flag values: reals must be finite", "[core][command_line]") {
  for (const char* text : {"inf", "-inf", "Infinity", "nan", "NaN", "1e400", "-1e999"})
    CHECK(error_of([&] { parse_real_flag("--lr", text); }) == std::string("--lr: '") + text + "' is not a finite number");
  CHECK(error_of([&] { parse_real_flag("--lr", "1e-400"); }) == "--lr: '1e-400' is too small to be represented (use 0)");
  CHECK(parse_real_flag("--lr", "3e-4") == 3e-4);
  CHECK(error_of([&] { parse_integer_flag("--num-layers", "99999999999999999999"); }) ==
        "--num-layers: '99999999999999999999' is out of range");
}

TEST_CASE("flag values: the range of each flag, named by the flag", "[core][command_line]") {
  CHECK(error_of([&] { parse_real_flag("--lr", "-1"); }) == "--lr must be at least 0, got -1");
  CHECK(error_of([&] { parse_real_flag("--adam-beta1", "1"); }) == "--adam-beta1 must be in [0, 1), got 1");
  CHECK(error_of([&] { parse_real_flag("--adam-eps", "0"); }) == "--adam-eps must be greater than 0, got 0");
  CHECK(error_of([&] { parse_real_flag("--temperature", "0"); }) == "--temperature must be in (0, 100], got 0");
  CHECK(error_of([&] { parse_integer_flag("--seed", "-1"); }) == "--seed must be between 0 and 4294967295, got -1");
  CHECK(error_of([&] { parse_integer_flag("--hidden-size", "4294967296"); }) ==
        "--hidden-size must be between 1 and 2147483647, got 4294967296");
  CHECK(error_of([&] { parse_integer_flag("--no-such-range", "-5"); }).empty());  // unknown: unchecked
  CHECK(parse_real_flag("--hidden-dropout", "0") == 0.0);
  CHECK(parse_integer_flag("--eval-iters", "0") == 0);

  // The table is sorted (it is searched by bisection), and names flags someone has.
  const std::vector<std::string_view> flags = flags_with_known_ranges();
  CHECK(std::is_sorted(flags.begin(), flags.end()));
  CHECK(std::adjacent_find(flags.begin(), flags.end()) == flags.end());
  for (std::string_view flag : flags) CHECK(known_flag_range(flag));
}

TEST_CASE("mgt-train: non-finite and out-of-range values are blamed on their own flag", "[train][command_line]") {
  // --lr inf was accepted (and every update skipped); --lr nan was reported as a --min-lr problem.
  CHECK(train_error({"--lr", "inf"}) == "--lr: 'inf' is not a finite number");
  CHECK(train_error({"--lr", "nan"}) == "--lr: 'nan' is not a finite number");
  CHECK(train_error({"--lr", "1e-3", "--min-lr", "nan"}) == "--min-lr: 'nan' is not a finite number");
  CHECK(train_error({"--lr", "1e-3", "--weight-decay", "-inf"}) == "--weight-decay: '-inf' is not a finite number");
  CHECK(train_error({"--lr", "1e-3", "--hidden-dropout", "1"}) == "--hidden-dropout must be in [0, 1), got 1");
  CHECK(train_error({"--lr", "1e-3", "--init-method-std", "0"}) == "--init-method-std must be greater than 0, got 0");
  CHECK(train_error({"--lr", "1e-3", "--eval-iters", "-1"}) == "--eval-iters must be at least 0, got -1");
  CHECK(train_error({"--lr", "1e-3", "--num-layers", "0"}) == "--num-layers must be between 1 and 2147483647, got 0");
  CHECK(train_error({"--lr", "1e-3", "--seed", "4294967296"}) == "--seed must be between 0 and 4294967295, got 4294967296");
}

TEST_CASE("every program's numeric flags go through the same checks", "[core][command_line]") {
  CHECK(usage_error(parse_eval_command_line, "mgt-eval",
                    {"--task", "LAMBADA", "--valid-data", "x", "--load", "c", "--micro-batch-size", "0"}) ==
        "--micro-batch-size must be between 1 and 2147483647, got 0");
  // Model-shape flags repeated for a checkpoint are numbers too, before they are compared with it.
  CHECK(usage_error(parse_eval_command_line, "mgt-eval",
                    {"--task", "LAMBADA", "--valid-data", "x", "--load", "c", "--norm-epsilon", "inf"}) ==
        "--norm-epsilon: 'inf' is not a finite number");
  CHECK(usage_error(parse_generate_command_line, "mgt-generate", {"--load", "c", "--num-layers", "-2"}) ==
        "--num-layers must be between 1 and 2147483647, got -2");
  CHECK(usage_error(parse_generate_command_line, "mgt-generate", {"--load", "c", "--temperature", "nan"}) ==
        "--temperature: 'nan' is not a finite number");
  CHECK(usage_error(parse_generate_command_line, "mgt-generate", {"--load", "c", "--top-p", "1.5"}) ==
        "--top-p must be in [0, 1], got 1.5");
  CHECK(usage_error(parse_index_command_line, "mgt-index", {"--mid-level-dataset-surplus", "inf"}) ==
        "--mid-level-dataset-surplus: 'inf' is not a finite number");
  CHECK(usage_error(parse_tokenize_command_line, "mgt-tokenize", {"--partitions", "0"}) ==
        "--partitions must be between 1 and 65536, got 0");
  CHECK(usage_error(parse_convert_command_line, "mgt-ckpt-convert",
                    {"--model-type", "GPT", "--loader", "hf", "--saver", "mgt", "--true-vocab-size", "-3"}) ==
        "--true-vocab-size must be between 1 and 2147483647, got -3");
}

TEST_CASE("config.json values are judged under their own keys", "[ckpt]") {
  auto config_error = [](const std::string& json) {
    return error_of([&] { parse_hf_gpt2_config_json(json, "m/config.json"); });
  };
  CHECK(config_error(R"({"model_type": "gpt2", "resid_pdrop": 1.5})") ==
        "GPT-2 config m/config.json: resid_pdrop must be in [0, 1) (got 1.5)");
  CHECK(config_error(R"({"model_type": "gpt2", "layer_norm_epsilon": 0})") ==
        "GPT-2 config m/config.json: layer_norm_epsilon must be a positive number (got 0.0)");
  CHECK(config_error(R"({"model_type": "gpt2", "n_layer": 1000000000000})") ==
        "GPT-2 config m/config.json: n_layer must be between 1 and 2147483647 (got 1000000000000)");
  CHECK(config_error(R"({"model_type": "gpt2", "n_inner": 0})") ==
        "GPT-2 config m/config.json: n_inner must be null or between 1 and 2147483647 (got 0)");
}
