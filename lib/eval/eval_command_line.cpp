#include "eval/eval_command_line.hpp"

#include <map>

#include "ckpt/checkpoint_read_flags.hpp"
#include "ckpt/model_shape_flags.hpp"
#include "tokenizer/tokenizer_flags.hpp"
#include "core/cxxopts_command_line.hpp"
#include "core/error.hpp"
#include "core/megatron_compatibility.hpp"
#include "kernels/backend_factory.hpp"

namespace mgt {

namespace {

constexpr const char* kProgram = "mgt-eval";

// argparse nargs='*' in tasks/main.py.
const std::map<std::string, FlagArity> kListFlags = {{"--valid-data", FlagArity::Many}};

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
  // clang-format off
  o.add_options("task")
      ("task", "LAMBADA (accuracy) or WIKITEXT103 (perplexity) (required)", cxxopts::value<std::string>(), "NAME")
      ("valid-data", "The data file: LAMBADA JSON lines with \"text\", or a WikiText token file "
                     "(its path picks the detokenizer: 'ptb', 'wiki' or 'lambada') (required)",
       cxxopts::value<std::vector<std::string>>(), "FILE")
      ("strict-lambada", "LAMBADA: the target is the last word (possibly several tokens), not the "
                         "last token")
      ("overlapping-eval", "WIKITEXT103: stride of the evaluation windows, 1 to --seq-length",
       cxxopts::value<std::string>()->default_value("32"), "N")
      ("seq-length", "Tokens per window; longer LAMBADA examples lose the start of their context "
                     "(default: the checkpoint's)", cxxopts::value<std::string>(), "N")
      ("micro-batch-size", "Windows or examples per forward pass",
       cxxopts::value<std::string>()->default_value("8"), "N")
      ("device", "mgt: compute device: auto (a GPU when one is visible), cpu, cuda or cuda:N",
       cxxopts::value<std::string>()->default_value("auto"), "D");
  o.add_options("checkpoint")
      ("load", "Checkpoint: a save directory (latest iteration) or an iteration directory (required)",
       cxxopts::value<std::string>(), "DIR");
  add_checkpoint_read_flags(o);
  add_tokenizer_flags(o);
  add_model_shape_flags(o);
  o.add_options("output")
      ("output", "mgt: write the JSON result to FILE (atomically) instead of standard output",
       cxxopts::value<std::string>(), "FILE")
      ("log-interval", "Micro-batches between progress lines when stderr is not a terminal",
       cxxopts::value<std::string>()->default_value("100"), "N")
      ("h,help", "Show this help");
  // clang-format on
  add_version_flag(o, "output");
  return o;
}

std::int64_t positive(const FlagValues& f, const char* name) {
  const std::int64_t v = f.integer(name);
  if (v < 1) throw UsageError(std::string("--") + name + " must be at least 1, not " + std::to_string(v));
  return v;
}

EvalOptions to_eval_options(const FlagValues& f, const cxxopts::ParseResult& result) {
  EvalOptions o;
  if (!f.has("task")) throw UsageError("--task is required: LAMBADA or WIKITEXT103");
  const std::string task = f.text("task");
  check_choice("--task", task, {"LAMBADA", "WIKITEXT103"});
  o.task = task == "LAMBADA" ? ZeroShotTask::kLambada : ZeroShotTask::kWikitext103;

  const std::vector<std::string> data = f.has("valid-data") ? f.list("valid-data") : std::vector<std::string>{};
  if (data.empty()) throw UsageError("--valid-data is required: the file to evaluate");
  if (data.size() > 1)
    throw UsageError("--valid-data takes one file (Megatron's zero-shot tasks assert so); got " +
                     std::to_string(data.size()));
  o.valid_data = data[0];

  f.set("strict-lambada", o.strict_lambada);
  const std::int64_t stride = f.integer("overlapping-eval");
  if (stride < 1)
    throw UsageError("--overlapping-eval must be at least 1, not " + std::to_string(stride) +
                     " (Megatron would silently use 1)");
  o.overlapping_eval = stride;
  if (f.has("seq-length")) o.seq_length = positive(f, "seq-length");
  o.micro_batch_size = positive(f, "micro-batch-size");

  if (!f.has("load")) throw UsageError("--load is required: the checkpoint to evaluate");
  o.load = f.text("load");
  o.checkpoint_flags = read_checkpoint_read_flags(f, kProgram);
  o.device = f.text("device");
  check_device_name(o.device);

  o.tokenizer = given_tokenizer_flags(f);
  o.model_flags = given_model_shape_flags(result);
  f.set("output", o.output);
  o.log_interval = positive(f, "log-interval");
  return o;
}

// The program's flags, its refusals, and the Megatron flags every program treats alike.
CommandLineRules command_line_rules(const cxxopts::Options& options) {
  std::map<std::string, FlagArity> lists = kListFlags;
  lists.insert(tokenizer_model_list_flags().begin(), tokenizer_model_list_flags().end());
  CommandLineRules rules{declared_flags(options, lists), kRefusedFlags, true};
  add_megatron_compatibility_flags(rules);
  return rules;
}

}  // namespace

EvalCommandLine parse_eval_command_line(int argc, const char* const* argv) {
  cxxopts::Options options = make_options();
  ParsedCommandLine parsed = parse_command_line(options, argc, argv, command_line_rules(options), kProgram);
  const cxxopts::ParseResult& result = parsed.flags;
  EvalCommandLine command;
  if (result.count("help")) {
    command.show_help = true;
    return command;
  }
  command.ignored = std::move(parsed.ignored);
  command.options = to_eval_options(FlagValues(result), result);
  return command;
}

std::string eval_help() {
  const cxxopts::Options options = make_options();
  // The groups in the order a user needs them, not cxxopts's alphabetical one.
  std::vector<std::string> groups = {"task", "checkpoint", "tokenizer (default: the one recorded in the checkpoint)"};
  for (const std::string& g : options.groups())
    if (g.rfind("model", 0) == 0) groups.push_back(g);
  groups.push_back("output");
  return options.help(groups) + "\n" + ignored_flags_help(command_line_rules(options)) +
         "\nThe result goes to standard output (or --output) as one JSON object; Megatron's result "
         "line,\nprogress and a summary go to standard error.\nSee man mgt-eval(1) for the methods, "
         "outputs, exit codes and compatibility notes.\n";
}

}  // namespace mgt
