#include "data/index_command_line.hpp"

#include <map>

#include "core/cxxopts_command_line.hpp"
#include "core/error.hpp"
#include "core/megatron_compatibility.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/tokenizer_flags.hpp"
#include "tokenizer/tokenizer_type_inference.hpp"

namespace mgt {

namespace {

constexpr const char* kProgram = "mgt-index";

// Lists as Megatron's argparse nargs='*' takes them; unlike argparse, a repeated flag adds to the
// earlier values.
const std::map<std::string, FlagArity> kListFlags = {{"--data-path", FlagArity::ManyAppending},
                                                     {"--train-data-path", FlagArity::ManyAppending},
                                                     {"--valid-data-path", FlagArity::ManyAppending},
                                                     {"--test-data-path", FlagArity::ManyAppending},
                                                     {"--rampup-batch-size", FlagArity::Many}};

// Megatron flags that matter for dataset indices but are not implemented, with the reason.
const std::map<std::string, std::string> kRefusedFlags = {
    {"--mock-data", "mock data has no index to cache"},
    {"--per-split-data-args-path", "pass the lists to --train-data-path, --valid-data-path, --test-data-path"},
    {"--full-validation", "validation sizes follow --eval-iters and --eval-interval"},
    {"--skip-train", "the train split is always indexed"},
    {"--object-storage-cache-path", "object storage is not supported"},
    {"--dataloader-type", "only the 'single' sampler order is supported"},
};

cxxopts::Options make_options() {
  cxxopts::Options o(kProgram,
                     "Build (or find in the cache) the GPTDataset and BlendedDataset indices that "
                     "Megatron-LM's pretrain_gpt.py would build for the same flags, byte for byte.");
  o.custom_help("--data-path [W] PREFIX... --seq-length N (--train-iters N | --train-samples N) "
                "(--global-batch-size N | --micro-batch-size N) --tokenizer-type TYPE [options]");
  std::string types;
  for (const auto& t : supported_tokenizer_types()) types += (types.empty() ? "" : ", ") + t;
  // Numbers are declared as strings and parsed by FlagValues, so that a bad value names its flag.
  // clang-format off
  o.add_options("data")
      ("data-path", "Dataset prefixes, optionally weighted: 'W1 PREFIX1 W2 PREFIX2 ...' (required, or "
                    "--data-args-path, or the per-split paths)",
       cxxopts::value<std::vector<std::string>>(), "[W] PREFIX...")
      ("data-args-path", "File holding the --data-path list (needs --split)",
       cxxopts::value<std::string>(), "FILE")
      ("split", "Train, valid, test proportions of --data-path (default: \"969, 30, 1\")",
       cxxopts::value<std::string>(), "A,B,C")
      ("train-data-path", "Train split datasets ([W] PREFIX...), instead of --data-path",
       cxxopts::value<std::vector<std::string>>(), "[W] PREFIX...")
      ("valid-data-path", "Validation split datasets ([W] PREFIX...)",
       cxxopts::value<std::vector<std::string>>(), "[W] PREFIX...")
      ("test-data-path", "Test split datasets ([W] PREFIX...)",
       cxxopts::value<std::vector<std::string>>(), "[W] PREFIX...")
      ("data-cache-path", "Directory for the index files (default: PREFIX/cache/GPTDataset_indices; "
                          "blend indices are cached only here)",
       cxxopts::value<std::string>(), "DIR")
      ("mid-level-dataset-surplus", "Extra fraction of samples built per blended dataset",
       cxxopts::value<std::string>()->default_value("0.005"), "F");
  o.add_options("sizes")
      ("seq-length", "Tokens per sample (required)", cxxopts::value<std::string>(), "N")
      ("train-iters", "Training iterations (required, or --train-samples)", cxxopts::value<std::string>(), "N")
      ("train-samples", "Training samples (required, or --train-iters)", cxxopts::value<std::string>(), "N")
      ("global-batch-size", "Samples per iteration (required, or --micro-batch-size)",
       cxxopts::value<std::string>(), "N")
      ("micro-batch-size", "Samples per micro-batch; alone, also per iteration, one data-parallel rank "
                           "(required, or --global-batch-size)", cxxopts::value<std::string>(), "N")
      ("rampup-batch-size", "Batch-size ramp-up, as mgt-train's (with --train-samples): the iterations, "
                            "and so the validation samples, follow it",
       cxxopts::value<std::vector<std::string>>(), "START INCREMENT SAMPLES")
      ("eval-iters", "Validation iterations per evaluation",
       cxxopts::value<std::string>()->default_value("100"), "N")
      ("eval-interval", "Iterations between evaluations",
       cxxopts::value<std::string>()->default_value("1000"), "N")
      ("seed", "Random seed of the shuffles", cxxopts::value<std::string>()->default_value("1234"), "N");
  o.add_options("tokenizer")
      ("tokenizer-type", "One of: " + types + " (required, unless --vocab-file and --merge-file name "
                         "GPT2BPETokenizer)", cxxopts::value<std::string>(), "TYPE")
      ("vocab-file", "Vocabulary file", cxxopts::value<std::string>(), "FILE")
      ("merge-file", "GPT-2 BPE merges file", cxxopts::value<std::string>(), "FILE")
      ("vocab-size", "Vocabulary size of NullTokenizer, or of TikTokenizer (default: 131072 for TikTokenizer)",
       cxxopts::value<std::string>(), "N")
      ("vocab-extra-ids", "Extra <extra_id_i> tokens (BERT and SentencePiece tokenizers)",
       cxxopts::value<std::string>()->default_value("0"), "N");
  add_tokenizer_model_flags(o, "tokenizer");
  o.add_options("samples")
      ("eod-mask-loss", "In --dump-samples: no loss on end-of-document input tokens")
      ("reset-position-ids", "In --dump-samples: positions restart after each end of document")
      ("reset-attention-mask", "In --dump-samples: list where documents start (segment_starts)");
  o.add_options("mgt")
      ("dump-samples", "mgt: write the first --dump-count samples of each split (tokens, labels, loss "
                       "mask, positions) to FILE as JSON lines",
       cxxopts::value<std::string>(), "FILE")
      ("dump-count", "mgt: samples per split for --dump-samples",
       cxxopts::value<std::string>()->default_value("16"), "N")
      ("h,help", "Show this help");
  // clang-format on
  add_version_flag(o, "mgt");
  return o;
}

IndexOptions to_index_options(const FlagValues& f) {
  IndexOptions o;
  f.set("data-path", o.data_path);
  f.set("data-args-path", o.data_args_path);
  f.set("train-data-path", o.train_data_path);
  f.set("valid-data-path", o.valid_data_path);
  f.set("test-data-path", o.test_data_path);
  f.set("split", o.split);
  f.set("data-cache-path", o.data_cache_path);
  o.mid_level_dataset_surplus = f.real("mid-level-dataset-surplus");
  f.set("seq-length", o.seq_length);
  f.set("train-iters", o.train_iters);
  f.set("train-samples", o.train_samples);
  f.set("global-batch-size", o.global_batch_size);
  f.set("micro-batch-size", o.micro_batch_size);
  if (f.has("rampup-batch-size")) o.rampup_batch_size = parse_rampup_batch_size(f.list("rampup-batch-size"));
  o.eval_iters = f.integer("eval-iters");
  o.eval_interval = f.integer("eval-interval");
  o.seed = f.integer("seed");
  f.set("tokenizer-type", o.tokenizer.type);
  f.set("vocab-file", o.tokenizer.vocab_file);
  f.set("merge-file", o.tokenizer.merge_file);
  if (f.has("vocab-size")) o.tokenizer.vocab_size = f.integer("vocab-size");
  const std::int64_t extra = f.integer("vocab-extra-ids");
  if (extra < 0 || extra > 1000000) throw UsageError("--vocab-extra-ids must be between 0 and 1000000");
  o.tokenizer.vocab_extra_ids = static_cast<int>(extra);
  set_tokenizer_model_flags(f, o.tokenizer);
  infer_tokenizer_type_from_files(o.tokenizer, kProgram);
  f.set("eod-mask-loss", o.eod_mask_loss);
  f.set("reset-position-ids", o.reset_position_ids);
  f.set("reset-attention-mask", o.reset_attention_mask);
  f.set("dump-samples", o.dump_samples_path);
  o.dump_count = f.integer("dump-count");
  return o;
}

// The program's flags, its refusals, and the Megatron flags every program treats alike.
CommandLineRules command_line_rules(const cxxopts::Options& options) {
  std::map<std::string, FlagArity> lists = kListFlags;
  lists.merge(tokenizer_model_list_flags());
  CommandLineRules rules{declared_flags(options, lists), kRefusedFlags, true};
  add_megatron_compatibility_flags(rules);
  return rules;
}

}  // namespace

IndexCommandLine parse_index_command_line(int argc, const char* const* argv) {
  cxxopts::Options options = make_options();
  ParsedCommandLine parsed = parse_command_line(options, argc, argv, command_line_rules(options), kProgram);
  const cxxopts::ParseResult& result = parsed.flags;
  IndexCommandLine command;
  if (result.count("help")) {
    command.show_help = true;
    return command;
  }
  command.ignored = std::move(parsed.ignored);
  command.options = to_index_options(FlagValues(result));
  return command;
}

std::string index_help() {
  const cxxopts::Options options = make_options();
  return options.help() + "\n" + ignored_flags_help(command_line_rules(options)) +
         "\nResults go to standard output as JSON, a table and progress to standard "
         "error.\nSee man mgt-index(1) for outputs, exit codes and compatibility notes.\n";
}

}  // namespace mgt
