// mgt-index: build Megatron's GPTDataset / BlendedDataset index caches (the .npy files that
// pretrain_gpt.py writes before training) ahead of time, byte for byte.
// Flags → IndexOptions; all the work is in lib/data/index_job.
// Values must never be split at commas (paths may contain them): one value per occurrence.
#define CXXOPTS_VECTOR_DELIMITER '\0'
#include <cxxopts.hpp>

#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/index_job.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

constexpr const char* kProgram = "mgt-index";

// Flags taking several space-separated values, as Megatron's argparse nargs='*' does.
const std::set<std::string> kMultiValueFlags = {"--data-path", "--train-data-path",
                                                "--valid-data-path", "--test-data-path"};

// Megatron flags that matter for dataset indices but are not implemented, with the reason.
const std::map<std::string, std::string> kRefusedFlags = {
    {"--mock-data", "mock data has no index to cache"},
    {"--per-split-data-args-path", "pass the lists to --train-data-path, --valid-data-path, --test-data-path"},
    {"--full-validation", "validation sizes follow --eval-iters and --eval-interval"},
    {"--skip-train", "the train split is always indexed"},
    {"--object-storage-cache-path", "object storage is not supported"},
    {"--tokenizer-model", "SentencePiece, HuggingFace and TikToken tokenizers are not supported"},
    {"--rampup-batch-size", "batch-size ramp-up is not supported"},
    {"--dataloader-type", "only the 'single' sampler order is supported"},
};

cxxopts::Options make_options() {
  cxxopts::Options o(kProgram,
                     "Build (or find in the cache) the GPTDataset and BlendedDataset indices that "
                     "Megatron-LM's pretrain_gpt.py would build for the same flags, byte for byte.");
  o.custom_help("--data-path [W] PREFIX... --seq-length N --train-iters N --global-batch-size N "
                "--tokenizer-type TYPE [options]");
  std::string types;
  for (const auto& t : mgt::supported_tokenizer_types()) types += (types.empty() ? "" : ", ") + t;
  // clang-format off
  o.add_options("data")
      ("data-path", "Dataset prefixes, optionally weighted: 'W1 PREFIX1 W2 PREFIX2 ...'",
       cxxopts::value<std::vector<std::string>>(), "[W] PREFIX...")
      ("data-args-path", "File holding the --data-path list (needs --split)",
       cxxopts::value<std::string>(), "FILE")
      ("split", "Train, valid, test proportions of --data-path (default \"969, 30, 1\")",
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
      ("seq-length", "Tokens per sample", cxxopts::value<std::string>(), "N")
      ("train-iters", "Training iterations", cxxopts::value<std::string>(), "N")
      ("train-samples", "Training samples (instead of --train-iters)",
       cxxopts::value<std::string>(), "N")
      ("global-batch-size", "Samples per iteration (default: --micro-batch-size)",
       cxxopts::value<std::string>(), "N")
      ("micro-batch-size", "Samples per micro-batch", cxxopts::value<std::string>(), "N")
      ("eval-iters", "Validation iterations per evaluation",
       cxxopts::value<std::string>()->default_value("100"), "N")
      ("eval-interval", "Iterations between evaluations",
       cxxopts::value<std::string>()->default_value("1000"), "N")
      ("seed", "Random seed of the shuffles", cxxopts::value<std::string>()->default_value("1234"), "N");
  o.add_options("tokenizer")
      ("tokenizer-type", "One of: " + types, cxxopts::value<std::string>(), "TYPE")
      ("vocab-file", "Vocabulary file", cxxopts::value<std::string>(), "FILE")
      ("merge-file", "GPT-2 BPE merges file", cxxopts::value<std::string>(), "FILE")
      ("vocab-size", "Vocabulary size (NullTokenizer)", cxxopts::value<std::string>(), "N")
      ("vocab-extra-ids", "Extra <extra_id_i> tokens (BERT tokenizers)",
       cxxopts::value<std::string>()->default_value("0"), "N");
  o.add_options("samples")
      ("eod-mask-loss", "In --dump-samples: no loss on end-of-document input tokens")
      ("reset-position-ids", "In --dump-samples: positions restart after each end of document")
      ("reset-attention-mask", "In --dump-samples: list where documents start (segment_starts)");
  o.add_options("mgt")
      ("dump-samples", "Write the first --dump-count samples of each split (tokens, labels, loss "
                       "mask, positions) to FILE as JSON lines",
       cxxopts::value<std::string>(), "FILE")
      ("dump-count", "Samples per split for --dump-samples",
       cxxopts::value<std::string>()->default_value("16"), "N")
      ("h,help", "Show this help");
  // clang-format on
  return o;
}

// Rewrites "--data-path a b c" as "--data-path=a --data-path=b --data-path=c" for cxxopts, checks
// every flag name, and refuses Megatron flags that are not implemented, naming them.
std::vector<std::string> normalize_arguments(int argc, char** argv, const cxxopts::Options& options) {
  std::map<std::string, bool> known;  // flag -> takes a value
  for (const auto& group : options.groups())
    for (const auto& opt : options.group_help(group).options)
      known["--" + opt.l.back()] = !opt.is_boolean;
  std::vector<std::string> out{argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h") {
      out.push_back(arg);
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      if (arg.rfind("-", 0) == 0) throw mgt::UsageError("unknown option '" + arg + "' (see --help)");
      throw mgt::UsageError("unexpected argument '" + arg + "' (see --help)");
    }
    std::string name = arg.substr(0, arg.find('='));
    if (auto refused = kRefusedFlags.find(name); refused != kRefusedFlags.end())
      throw mgt::UsageError(name + " is not supported by " + kProgram + ": " + refused->second);
    auto flag = known.find(name);
    if (flag == known.end()) throw mgt::UsageError("unknown option '" + name + "' (see --help)");
    const bool has_inline_value = arg.find('=') != std::string::npos;
    if (!flag->second || has_inline_value) {
      if (!flag->second && has_inline_value) throw mgt::UsageError(name + " takes no value");
      out.push_back(arg);
      continue;
    }
    if (!kMultiValueFlags.count(name)) {
      if (i + 1 >= argc) throw mgt::UsageError(name + " needs a value");
      out.push_back(name + "=" + argv[++i]);
      continue;
    }
    int values = 0;
    while (i + 1 < argc && argv[i + 1][0] != '-') {
      out.push_back(name + "=" + argv[++i]);
      ++values;
    }
    if (values == 0) throw mgt::UsageError(name + " needs at least one value");
  }
  return out;
}

// Numbers are parsed here rather than by cxxopts so that a bad value names its flag.
std::int64_t parse_integer(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw mgt::UsageError("--" + flag + ": '" + text + "' is not an integer");
  return v;
}

double parse_real(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) throw mgt::UsageError("--" + flag + ": '" + text + "' is not a number");
  return v;
}

mgt::IndexOptions to_index_options(const cxxopts::ParseResult& r) {
  mgt::IndexOptions o;
  auto list = [&](const char* flag) {
    return r.count(flag) ? r[flag].as<std::vector<std::string>>() : std::vector<std::string>{};
  };
  auto text = [&](const char* flag) { return r[flag].as<std::string>(); };
  auto integer = [&](const char* flag) { return parse_integer(flag, text(flag)); };
  auto optional_integer = [&](const char* flag) -> std::optional<std::int64_t> {
    if (!r.count(flag)) return std::nullopt;
    return integer(flag);
  };
  o.data_path = list("data-path");
  if (r.count("data-args-path")) o.data_args_path = text("data-args-path");
  o.train_data_path = list("train-data-path");
  o.valid_data_path = list("valid-data-path");
  o.test_data_path = list("test-data-path");
  if (r.count("split")) o.split = text("split");
  if (r.count("data-cache-path")) o.data_cache_path = text("data-cache-path");
  o.mid_level_dataset_surplus = parse_real("mid-level-dataset-surplus", text("mid-level-dataset-surplus"));
  o.seq_length = optional_integer("seq-length");
  o.train_iters = optional_integer("train-iters");
  o.train_samples = optional_integer("train-samples");
  o.global_batch_size = optional_integer("global-batch-size");
  o.micro_batch_size = optional_integer("micro-batch-size");
  o.eval_iters = integer("eval-iters");
  o.eval_interval = integer("eval-interval");
  o.seed = integer("seed");
  if (r.count("tokenizer-type")) o.tokenizer.type = text("tokenizer-type");
  if (r.count("vocab-file")) o.tokenizer.vocab_file = text("vocab-file");
  if (r.count("merge-file")) o.tokenizer.merge_file = text("merge-file");
  o.tokenizer.vocab_size = optional_integer("vocab-size");
  std::int64_t extra = integer("vocab-extra-ids");
  if (extra < 0 || extra > 1000000) throw mgt::UsageError("--vocab-extra-ids must be between 0 and 1000000");
  o.tokenizer.vocab_extra_ids = static_cast<int>(extra);
  o.eod_mask_loss = r.count("eod-mask-loss") > 0;
  o.reset_position_ids = r.count("reset-position-ids") > 0;
  o.reset_attention_mask = r.count("reset-attention-mask") > 0;
  if (r.count("dump-samples")) o.dump_samples_path = text("dump-samples");
  o.dump_count = integer("dump-count");
  return o;
}

int run(int argc, char** argv) {
  cxxopts::Options options = make_options();
  std::vector<std::string> args = normalize_arguments(argc, argv, options);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  try {
    cxxopts::ParseResult result = options.parse(static_cast<int>(cargs.size()), cargs.data());
    if (result.count("help")) {
      std::cout << options.help()
                << "\nResults go to standard output as JSON, a table and progress to standard "
                   "error.\nSee man mgt-index(1) for outputs, exit codes and compatibility notes.\n";
      return mgt::kExitOk;
    }
    mgt::IndexOptions opts = to_index_options(result);
    return mgt::run_index(opts);
  } catch (const cxxopts::exceptions::exception& e) {
    throw mgt::UsageError(std::string(e.what()) + " (see --help)");
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const mgt::Error& e) {
    std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    return mgt::kExitFailure;
  }
}
