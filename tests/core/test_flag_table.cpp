#include <catch2/catch.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/flag_table.hpp"

using namespace mgt;

namespace {

struct Options {
  std::int64_t layers = 12;
  std::optional<std::int64_t> heads;
  double dropout = 0.1;
  double epsilon = 1e-5;
  std::string style = "linear";
  std::optional<std::string> method;
  bool bias = true;
  bool swiglu = false;
  std::vector<std::string> paths;
  std::vector<std::int64_t> ranks{0};
  int extra = 0;
};

std::vector<FlagDefinition> table(Options& o) {
  return flag_groups({
      {"model", {
          store("num-layers", "N", o.layers, "Layers"),
          store("num-attention-heads", "N", o.heads, "Heads").required(),
          store("hidden-dropout", "P", o.dropout, "Dropout"),
          store("norm-epsilon", "F", o.epsilon, "Epsilon"),
          store_false("disable-bias-linear", o.bias, "No biases").key("add_bias_linear"),
          store_true("swiglu", o.swiglu, "SwiGLU"),
          store("vocab-extra-ids", "N", o.extra, "Extra ids"),
      }},
      {"training", {
          store("lr-decay-style", "S", o.style, "linear or cosine").choices({"linear", "cosine"}, {"WSD"}),
          store("recompute-method", "M", o.method, "uniform or block").choices({"uniform", "block"}),
          store_list("data-path", "PREFIX...", o.paths, "Datasets"),
          store_list("profile-ranks", "RANK...", o.ranks, "Ranks"),
          store("no-such-megatron-flag", "N", o.layers, "Ours").not_recorded("an alias"),
      }},
  });
}

const FlagDefinition& find(const std::vector<FlagDefinition>& flags, const std::string& name) {
  for (const FlagDefinition& f : flags)
    if (f.name() == name) return f;
  FAIL("no flag " << name);
  return flags.front();
}

std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitUsage);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("flag table: help written from the definition and the field's default", "[core][command_line]") {
  Options o;
  const auto flags = table(o);
  CHECK(find(flags, "num-layers").help() == "Layers (default: 12)");
  CHECK(find(flags, "num-layers").group() == "model");
  CHECK(find(flags, "lr-decay-style").group() == "training");
  CHECK(find(flags, "num-attention-heads").help() == "Heads (required)");
  CHECK(find(flags, "hidden-dropout").help() == "Dropout (default: 0.1)");
  CHECK(find(flags, "norm-epsilon").help() == "Epsilon (default: 1e-05)");  // as Python prints it
  CHECK(find(flags, "disable-bias-linear").help() == "No biases");              // switches show none
  CHECK(find(flags, "recompute-method").help() == "uniform or block");          // None shows none
  CHECK(find(flags, "data-path").help() == "Datasets");
  CHECK(find(flags, "profile-ranks").help() == "Ranks (default: 0)");
  CHECK(find(flags, "vocab-extra-ids").help() == "Extra ids (default: 0)");
  // Not in Megatron's pretraining parser: mgt's own.
  CHECK(find(flags, "no-such-megatron-flag").help() == "mgt: Ours (default: 12)");
  CHECK(flag_arities(flags).at("--data-path") == FlagArity::Many);
  CHECK(flag_arities(flags).at("--swiglu") == FlagArity::None);
}

TEST_CASE("flag table: values set and read back", "[core][command_line]") {
  Options o;
  const auto flags = table(o);
  find(flags, "num-layers").set({"24"});
  find(flags, "num-attention-heads").set({"16"});
  find(flags, "hidden-dropout").set({"0.2"});
  find(flags, "disable-bias-linear").set({});
  find(flags, "swiglu").set({});
  find(flags, "recompute-method").set({"block"});
  find(flags, "data-path").set({"a", "b"});
  find(flags, "profile-ranks").set({"1", "3"});
  find(flags, "vocab-extra-ids").set({"7"});
  CHECK(o.layers == 24);
  CHECK(o.heads == 16);
  CHECK(o.dropout == 0.2);
  CHECK_FALSE(o.bias);
  CHECK(o.swiglu);
  CHECK(o.method == "block");
  CHECK(o.paths == std::vector<std::string>{"a", "b"});
  CHECK(o.ranks == std::vector<std::int64_t>{1, 3});
  CHECK(o.extra == 7);
  CHECK(find(flags, "disable-bias-linear").record_key() == "add_bias_linear");
  CHECK(std::get<bool>(find(flags, "disable-bias-linear").recorded_value()) == false);
  CHECK(find(flags, "num-layers").record_key() == "num_layers");
  CHECK(find(flags, "no-such-megatron-flag").record_key().empty());
  CHECK(find(flags, "no-such-megatron-flag").not_recorded_reason() == "an alias");
  // Parsing names the flag.
  CHECK(usage_error([&] { find(flags, "num-layers").set({"x"}); }) == "--num-layers: 'x' is not an integer");
  CHECK(usage_error([&] { find(flags, "vocab-extra-ids").set({"-1"}); }) ==
        "--vocab-extra-ids must be between 0 and 1000000, got -1");
  CHECK(usage_error([&] { find(flags, "profile-ranks").set({"0", "-2"}); }) ==
        "--profile-ranks must be at least 0, got -2");
}

TEST_CASE("flag table: per-flag checks", "[core][command_line]") {
  Options o;
  const auto flags = table(o);
  CHECK(usage_error([&] { check_flag_values(flags, "prog"); }) == "--num-attention-heads is required");
  o.heads = 8;
  CHECK_NOTHROW(check_flag_values(flags, "prog"));
  o.style = "step";
  CHECK(usage_error([&] { check_flag_values(flags, "prog"); }) ==
        "--lr-decay-style: invalid choice 'step' (choose from linear, cosine)");
  o.style = "WSD";  // Megatron's, not ours
  CHECK(usage_error([&] { check_flag_values(flags, "prog"); }) ==
        "--lr-decay-style WSD is not supported by prog (linear or cosine)");
  o.style = "cosine";
  o.method = "full";
  CHECK(usage_error([&] { check_flag_values(flags, "prog"); }) ==
        "--recompute-method: invalid choice 'full' (choose from uniform, block)");
  o.method.reset();
  // Values set otherwise than from a command line meet the same ranges.
  o.layers = 0;
  CHECK(usage_error([&] { check_flag_values(flags, "prog"); }) == "--num-layers must be between 1 and 2147483647, got 0");
  o.layers = 2;
  o.dropout = 1.0;
  CHECK(usage_error([&] { check_flag_values(flags, "prog"); }) == "--hidden-dropout must be in [0, 1), got 1.0");
}

TEST_CASE("flag table: defaults as --help writes them", "[core][command_line]") {
  CHECK(describe_default(ArgValue()).empty());
  CHECK(describe_default(ArgValue(true)).empty());
  CHECK(describe_default(ArgValue(std::string())).empty());
  CHECK(describe_default(ArgValue(std::int64_t{10000})) == "10000");
  CHECK(describe_default(ArgValue(1.0)) == "1.0");
  CHECK(describe_default(ArgValue(1e-8)) == "1e-08");
  CHECK(describe_default(ArgValue(std::string("LayerNorm"))) == "LayerNorm");
  CHECK(describe_default(ArgValue(std::vector<std::int64_t>{0, 1})) == "0 1");
}

TEST_CASE("flag table: shared parts, required lists and what a requirement names", "[core][command_line]") {
  std::vector<std::string> files;
  std::string task;
  bool verbose = false;
  const auto flags = flag_groups({{"task", joined_flags({
                                              {store("task", "NAME", task, "Task").required("A or B")},
                                              {store_list("valid-data", "FILE", files, "Files").required()},
                                              {store_true("verbose", verbose, "More")},
                                          })}});
  REQUIRE(flags.size() == 3);
  CHECK(flags[2].group() == "task");
  CHECK(find_flag(flags, "verbose").description() == "More");
  CHECK_THROWS_WITH(find_flag(flags, "nope"), Catch::Contains("no flag --nope"));
  CHECK(usage_error([&] { check_flag_values(flags, "prog"); }) == "--task is required: A or B");
  task = "A";
  // An empty list is no value.
  CHECK(usage_error([&] { check_flag_values(flags, "prog"); }) == "--valid-data is required");
  files = {"f"};
  CHECK_NOTHROW(check_flag_values(flags, "prog"));
}
