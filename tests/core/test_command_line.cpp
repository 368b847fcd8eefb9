#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/command_line.hpp"
#include "core/error.hpp"

using namespace mgt;

namespace {

std::vector<std::string> normalize(std::vector<std::string> args, const CommandLineRules& rules) {
  args.insert(args.begin(), "prog");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return normalize_command_line(static_cast<int>(argv.size()), argv.data(), rules, "prog");
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
  CHECK(usage_error({"--input", "--quiet"}, rules()) == "--input needs at least one value");

  // Programs standing for another Megatron script do not name pretraining flags.
  CommandLineRules other = rules();
  other.name_pretraining_flags = false;
  CHECK(usage_error({"--num-layers", "2"}, other) == "unknown flag --num-layers (see --help)");
}
