#include "data/index_command_line.hpp"

#include <map>

#include "core/cxxopts_command_line.hpp"
#include "core/error.hpp"
#include "core/megatron_compatibility.hpp"
#include "data/dataset_flags.hpp"
#include "data/per_split_data_args.hpp"
#include "tokenizer/tokenizer_flags.hpp"
#include "tokenizer/tokenizer_type_inference.hpp"

namespace mgt {

namespace {

constexpr const char* kProgram = "mgt-index";

// Megatron flags that matter for dataset indices but are not implemented, with the reason.
// (--skip-train and --dataloader-type do not: build_train_valid_test_data_loaders builds every
// split's dataset, and so its cache files, whatever they say.)
const std::map<std::string, std::string> kRefusedFlags = {
    {"--mock-data", "mock data has no index to cache"},
    {"--full-validation", "validation sizes follow --eval-iters and --eval-interval"},
    {"--object-storage-cache-path", "object storage is not supported"},
    // Flags of pretrain_gpt.py that would change the datasets or their sizes, which mgt-index
    // does not build that way; every other flag of the script is accepted and ignored.
    {"--sft", "supervised fine-tuning datasets are not indexed"},
    {"--sft-tokenizer-prompt-format", "supervised fine-tuning datasets are not indexed"},
    {"--encoder-seq-length", "give the sequence length as --seq-length"},
    {"--decoder-seq-length", "give the sequence length as --seq-length"},
    {"--decrease-batch-size-if-needed", "the batch sizes are taken as given"},
};

const std::vector<std::string> kHelpGroups = {"data", "sizes", "tokenizer", "samples", "mgt"};

// A shared definition whose description says more in mgt-index's role.
FlagDefinition adding(FlagDefinition flag, const std::string& more) {
  std::string help = flag.description() + more;
  return std::move(flag).described_as(std::move(help));
}

cxxopts::Options make_options() {
  cxxopts::Options o(kProgram,
                     "Build (or find in the cache) the GPTDataset and BlendedDataset indices that "
                     "Megatron-LM's pretrain_gpt.py would build for the same flags, byte for byte.");
  o.custom_help("--data-path [W] PREFIX... --seq-length N (--train-iters N | --train-samples N) "
                "(--global-batch-size N | --micro-batch-size N) --tokenizer-type TYPE [options]");
  IndexOptions defaults;  // --help describes the defaults
  declare_flags(o, index_flags(defaults));
  o.add_options("mgt")("h,help", "Show this help");
  add_version_flag(o, "mgt");
  return o;
}

}  // namespace

// The flags mgt-train shares are mgt-train's definitions (data/dataset_flags.hpp,
// tokenizer/tokenizer_flags.hpp), with their defaults; only descriptions say more here. A
// repeated list flag keeps its last values, as pretrain_gpt.py's argparse and mgt-train do (the
// indices built are then the ones a training run of the same command line looks for). Ranges of
// numbers: core/flag_ranges.cpp; checks between flags: data/index_job.cpp.
// clang-format off
std::vector<FlagDefinition> index_flags(IndexOptions& o) {
  return flag_groups({
    {"data", dataset_source_flags(o, "Dataset prefixes, optionally weighted: 'W1 PREFIX1 W2 PREFIX2 ...' "
                                     "(required, or --data-args-path, or the per-split paths)")},
    {"sizes", {
      adding(seq_length_flag(o.seq_length), " (required)"),
      train_iters_flag(o.train_iters),
      train_samples_flag(o.train_samples),
      adding(global_batch_size_flag(o.global_batch_size), " (required, or --micro-batch-size)"),
      adding(micro_batch_size_flag(o.micro_batch_size),
             "; alone, also per iteration, one data-parallel rank (required, or --global-batch-size)"),
      adding(rampup_batch_size_flag(o.rampup_batch_size), ", as mgt-train's: the iterations, and so the validation samples, follow it"),
      eval_iters_flag(o.eval_iters),
      eval_interval_flag(o.eval_interval),
      adding(seed_flag(o.seed), " of the shuffles"),
    }},
    {"tokenizer", tokenizer_flags(o.tokenizer, TokenizerFlagsRole::kNamesTokenizer)},
    {"samples", [&] {
      std::vector<FlagDefinition> flags;
      for (FlagDefinition& f : sample_flags({o.eod_mask_loss, o.reset_position_ids, o.reset_attention_mask}))
        flags.push_back(std::move(f).described_as("In --dump-samples: " + f.description()));
      return flags;
    }()},
    {"mgt", {
      store("dump-samples", "FILE", o.dump_samples_path, "write the first --dump-count samples of each split (tokens, "
            "labels, loss mask, positions) to FILE as JSON lines"),
      store("dump-count", "N", o.dump_count, "samples per split for --dump-samples"),
    }},
  });
}
// clang-format on

namespace {

// The program's flags, its refusals, and the Megatron flags every program treats alike; then the
// rest of pretrain_gpt.py's command line, accepted and ignored (named on the start-up line), so
// that a training script's flags build its indices. The GPU features other programs refuse are
// among them: they do not change the indices either.
CommandLineRules command_line_rules() {
  IndexOptions defaults;
  CommandLineRules rules = table_command_line_rules(index_flags(defaults), kRefusedFlags);
  for (const auto& entry : gpu_feature_flags())
    if (!kRefusedFlags.count(entry.first)) rules.refused.erase(entry.first);
  rules.other_pretraining_flags_ignored_because = "no effect on the indices";
  return rules;
}

}  // namespace

IndexCommandLine parse_index_command_line(int argc, const char* const* argv) {
  cxxopts::Options options = make_options();
  ParsedCommandLine parsed = parse_command_line(options, argc, argv, command_line_rules(), kProgram);
  IndexCommandLine command;
  if (parsed.flags.count("help")) {
    command.show_help = true;
    return command;
  }
  command.ignored = std::move(parsed.ignored);
  read_flags(index_flags(command.options), FlagValues(parsed.flags), kProgram);
  read_per_split_data_args(command.options);
  infer_tokenizer_type_from_files(command.options.tokenizer, kProgram);
  return command;
}

std::string index_help() {
  return make_options().help(kHelpGroups) + "\n" + ignored_flags_help(command_line_rules()) +
         "Every other flag of pretrain_gpt.py is accepted and ignored too (named on the start-up line): a "
         "training script's command line builds its indices.\n"
         "\nResults go to standard output as JSON, a table and progress to standard "
         "error.\nSee man mgt-index(1) for outputs, exit codes and compatibility notes.\n";
}

}  // namespace mgt
