#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/command_line.hpp"
#include "core/error.hpp"

using namespace mgt;

namespace {

NormalizedCommandLine normalize_all(std::vector<std::string> args, const CommandLineRules& rules) {
  args.insert(args.begin(), "prog");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return normalize_command_line(static_cast<int>(argv.size()), argv.data(), rules, "prog");
}

std::vector<std::string> normalize(std::vector<std::string> args, const CommandLineRules& rules) {
  return normalize_all(std::move(args), rules).args;
}

std::string usage_error(std::vector<std::string> args, const CommandLineRules& rules) {
  try {
    normalize(std::move(args), rules);
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitUsage);
    return e.what();
  }
  FAIL("no error");
  return {};
}

CommandLineRules rules() {
  CommandLineRules r;
  r.known = {{"--input", FlagArity::ManyAppending},
             {"--data-path", FlagArity::Many},
             {"--seed", FlagArity::One},
             {"--quiet", FlagArity::None}};
  r.refused = {{"--tokenizer-model", "SentencePiece is not supported"}};
  r.ignored["--num-workers"] = {FlagArity::One, "no worker processes", {}, true, {}};
  r.ignored["--use-flash-attn"] = {FlagArity::None, "kernels chosen by mgt", {}, false, {}};
  r.ignored["--ckpt-format"] = {FlagArity::One, "HDF5", {"torch", "torch_dist"}, false, {{"zarr", "deprecated"}}};
  return r;
}

using Args = std::vector<std::string>;

}  // namespace

TEST_CASE("command line: values, lists and switches", "[core][command_line]") {
  CHECK(normalize({"--seed", "5", "--quiet", "--input", "a", "b", "--seed=-7"}, rules()) ==
        Args{"prog", "--seed=5", "--quiet", "--input=a", "--input=b", "--seed=-7"});
  // A repeated appending list keeps every value; a plain list keeps the last occurrence.
  CHECK(normalize({"--input", "a", "--input", "-", "--input=c"}, rules()) ==
        Args{"prog", "--input=a", "--input=-", "--input=c"});
  CHECK(normalize({"--data-path", "1", "x", "--data-path", "y"}, rules()) == Args{"prog", "--data-path=y"});
  CHECK(normalize({"-h"}, rules()) == Args{"prog", "-h"});
}

TEST_CASE("command line: errors name the flag", "[core][command_line]") {
  CHECK(usage_error({"--tokenizer-model", "m"}, rules()) ==
        "--tokenizer-model is not supported by prog: SentencePiece is not supported");
  CHECK(usage_error({"--tokenizer-model=m"}, rules()) ==
        "--tokenizer-model is not supported by prog: SentencePiece is not supported");
  CHECK(usage_error({"--num-layers", "2"}, rules()) == "--num-layers is a Megatron-LM flag that prog does not support");
  CHECK(usage_error({"--bogus"}, rules()) == "unknown flag --bogus (see --help)");
  CHECK(usage_error({"-x"}, rules()) == "unknown flag -x (see --help)");
  CHECK(usage_error({"stray"}, rules()) == "unexpected argument 'stray' (see --help)");
  CHECK(usage_error({"--quiet=1"}, rules()) == "--quiet takes no value");
  CHECK(usage_error({"--seed"}, rules()) == "--seed needs a value");
  // A value that begins with '-' and is no number (argparse refuses it too): one line, not a second
  // about an unknown flag.
  CHECK(usage_error({"--seed", "-10,5,5"}, rules()) == "--seed needs a value: -10,5,5 begins with '-' (write --seed=-10,5,5)");
  CHECK(usage_error({"--num-workers", "-2x"}, rules()) == "--num-workers needs a value: -2x begins with '-' (write --num-workers=-2x)");
  CHECK(usage_error({"--input", "--quiet"}, rules()) == "--input needs at least one value");

  // Programs standing for another Megatron script do not name pretraining flags.
  CommandLineRules other = rules();
  other.name_pretraining_flags = false;
  CHECK(usage_error({"--num-layers", "2"}, other) == "unknown flag --num-layers (see --help)");
}

TEST_CASE("command line: every bad flag is reported at once, in order", "[core][command_line]") {
  // One error, one line per problem; the values of refused and unknown flags are not reported
  // again as stray arguments, and the good flags around them do not hide them.
  CHECK(usage_error({"--seed", "5", "--tokenizer-model", "m", "--num-layers", "2", "--bogus", "a", "b", "--quiet",
                     "--quiet=1", "-x", "--input"},
                    rules()) ==
        "--tokenizer-model is not supported by prog: SentencePiece is not supported\n"
        "--num-layers is a Megatron-LM flag that prog does not support\n"
        "unknown flag --bogus (see --help)\n"
        "--quiet takes no value\n"
        "unknown flag -x (see --help)\n"
        "--input needs at least one value");
  // A Megatron switch owns no values: what follows it is still looked at.
  CHECK(usage_error({"--use-cpu-initialization", "stray", "--swiglu"}, rules()) ==
        "--use-cpu-initialization is a Megatron-LM flag that prog does not support\n"
        "unexpected argument 'stray' (see --help)\n"
        "--swiglu is a Megatron-LM flag that prog does not support");
  // One problem reads as before: a single line.
  CHECK(usage_error({"--bogus"}, rules()) == "unknown flag --bogus (see --help)");
}

TEST_CASE("command line: ignored flags are taken out and named once", "[core][command_line]") {
  const NormalizedCommandLine n =
      normalize_all({"--num-workers", "4", "--seed", "1", "--use-flash-attn", "--ckpt-format=torch_dist",
                     "--num-workers", "8"},
                    rules());
  CHECK(n.args == Args{"prog", "--seed=1"});
  REQUIRE(n.ignored.size() == 3);
  CHECK(n.ignored[0].flag == "--use-flash-attn");
  CHECK(n.ignored[0].value.empty());
  CHECK(n.ignored[1].flag == "--ckpt-format");
  CHECK(n.ignored[2].flag == "--num-workers");
  CHECK(n.ignored[2].value == "8");  // the last occurrence, as argparse keeps it
  CHECK(ignored_flags_line("prog", n.ignored) ==
        "prog: ignored flags (they change nothing here): --use-flash-attn (kernels chosen by mgt); "
        "--ckpt-format torch_dist (HDF5); --num-workers 8 (no worker processes)");
  CHECK(ignored_flags_line("prog", {}).empty());
  // Flags in a row with one reason share it.
  CHECK(ignored_flags_line("prog", {{"--a", "1", "r"}, {"--b", "", "r"}, {"--c", "2", "s"}, {"--d", "", "r"}}) ==
        "prog: ignored flags (they change nothing here): --a 1, --b (r); --c 2 (s); --d (r)");

  // Their values are still checked, and reported with the other problems.
  CHECK(usage_error({"--num-workers", "many", "--ckpt-format", "zarr", "--ckpt-format", "npz", "--use-flash-attn=1",
                     "--bogus"},
                    rules()) ==
        "--num-workers: 'many' is not an integer\n"
        "--ckpt-format zarr is not supported by prog: deprecated\n"
        "--ckpt-format: invalid choice 'npz' (choose from torch, torch_dist)\n"
        "--use-flash-attn takes no value\n"
        "unknown flag --bogus (see --help)");
  CHECK(usage_error({"--num-workers"}, rules()) == "--num-workers needs a value");

  // A flag the program takes itself, or refuses, is not ignored.
  CommandLineRules own = rules();
  own.known["--num-workers"] = FlagArity::One;
  own.refused["--use-flash-attn"] = "no";
  CHECK(normalize({"--num-workers", "3"}, own) == Args{"prog", "--num-workers=3"});
  CHECK(usage_error({"--use-flash-attn"}, own) == "--use-flash-attn is not supported by prog: no");
}
