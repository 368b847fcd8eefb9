#include "eval/eval_command_line.hpp"

#include <map>

#include "core/compute_flags.hpp"
#include "core/cxxopts_command_line.hpp"
#include "core/error.hpp"
#include "core/megatron_compatibility.hpp"
#include "eval/eval_flags.hpp"
#include "kernels/backend_factory.hpp"
#include "tokenizer/tokenizer_flags.hpp"

namespace mgt {

namespace {

constexpr const char* kProgram = "mgt-eval";

// Flags of tasks/main.py and of the pretraining parser that a zero-shot command line might
// carry but that mean nothing here, with the reason.
const std::map<std::string, std::string> kRefusedFlags = {
    {"--epochs", "zero-shot evaluation does not train"},
    {"--train-data", "zero-shot evaluation does not train"},
    {"--keep-last", "zero-shot evaluation does not train"},
    {"--pretrained-checkpoint", "name the checkpoint with --load"},
    {"--num-layers-per-virtual-pipeline-stage",
     "Megatron's zero-shot tasks do not support interleaved pipelines; mgt-eval runs one shard"},
    {"--reset-position-ids", "the zero-shot tasks evaluate text without documents inside it"},
    {"--reset-attention-mask", "the zero-shot tasks evaluate text without documents inside it"},
    {"--eod-mask-loss", "the zero-shot tasks choose the scored tokens themselves"},
};

cxxopts::Options make_options() {
  cxxopts::Options o(kProgram,
                     "Zero-shot evaluation of a GPT checkpoint as Megatron-LM's tasks/main.py does it: "
                     "LAMBADA cloze accuracy or WikiText-103 perplexity.");
  o.custom_help("--task LAMBADA|WIKITEXT103 --valid-data FILE --load DIR [options]");
  EvalFlagFields defaults;  // --help describes the defaults
  declare_flags(o, eval_flags(defaults));
  o.add_options("output")("h,help", "Show this help");
  add_version_flag(o, "output");
  return o;
}

// The program's flags, its refusals, and the Megatron flags every program treats alike.
CommandLineRules command_line_rules() {
  EvalFlagFields defaults;
  return table_command_line_rules(eval_flags(defaults), kRefusedFlags);
}

// What the values of single flags cannot tell, and the fields made of several values.
EvalOptions to_eval_options(EvalFlagFields& fields, const FlagValues& given) {
  EvalOptions o = fields.options;
  o.task = fields.task == "LAMBADA" ? ZeroShotTask::kLambada : ZeroShotTask::kWikitext103;
  if (fields.valid_data.size() > 1)
    throw UsageError("--valid-data takes one file (Megatron's zero-shot tasks assert so); got " +
                     std::to_string(fields.valid_data.size()));
  o.valid_data = fields.valid_data.front();
  check_device_name(o.device);
  TokenizerOptions scratch;
  if (any_flag_given(tokenizer_flags(scratch, TokenizerFlagsRole::kOverridesCheckpoint), given))
    o.tokenizer = fields.tokenizer;
  return o;
}

}  // namespace

EvalCommandLine parse_eval_command_line(int argc, const char* const* argv) {
  cxxopts::Options options = make_options();
  ParsedCommandLine parsed = parse_command_line(options, argc, argv, command_line_rules(), kProgram);
  EvalCommandLine command;
  if (parsed.flags.count("help")) {
    command.show_help = true;
    return command;
  }
  command.ignored = std::move(parsed.ignored);
  const FlagValues given(parsed.flags);
  check_one_precision_flag(given);
  EvalFlagFields fields;
  read_flags(eval_flags(fields), given, kProgram);
  command.options = to_eval_options(fields, given);
  return command;
}

std::string eval_help() {
  return make_options().help(eval_flag_groups()) + "\n" + ignored_flags_help(command_line_rules()) +
         "\nThe result goes to standard output (or --output) as one JSON object; Megatron's result "
         "line,\nprogress and a summary go to standard error.\nSee man mgt-eval(1) for the methods, "
         "outputs, exit codes and compatibility notes.\n";
}

}  // namespace mgt
