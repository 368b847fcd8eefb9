// mgt-tokenize: Megatron's tools/preprocess_data.py (and tools/merge_datasets.py with --merge).
// Flags → TokenizeOptions; all the work is in lib/data/tokenize_job.
// Values must never be split at commas (paths may contain them): one value per occurrence.
#define CXXOPTS_VECTOR_DELIMITER '\0'
#include <cxxopts.hpp>

#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "data/tokenize_job.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

constexpr const char* kProgram = "mgt-tokenize";

// Flags taking several space-separated values, as Megatron's argparse nargs='+' does.
const std::set<std::string> kMultiValueFlags = {"--input", "--json-keys"};

// Megatron flags mgt-tokenize knows but does not implement, with the reason.
const std::map<std::string, std::string> kRefusedFlags = {
    {"--tokenizer-model", "SentencePiece, HuggingFace and TikToken tokenizers are not supported"},
    {"--tiktoken-pattern", "TikTokenizer is not supported"},
    {"--tiktoken-num-special-tokens", "TikTokenizer is not supported"},
    {"--tiktoken-special-tokens", "TikTokenizer is not supported"},
    {"--tokenizer-metadata", "HEAD's TokenizerConfig flags are not supported"},
    {"--tokenizer-special-tokens", "HEAD's TokenizerConfig flags are not supported"},
    {"--tokenizer-hf-no-use-fast", "HuggingFace tokenizers are not supported"},
    {"--tokenizer-hf-no-include-special-tokens", "HuggingFace tokenizers are not supported"},
    {"--trust-remote-code", "HuggingFace tokenizers are not supported"},
    {"--chat-template", "HuggingFace tokenizers are not supported"},
    {"--null-tokenizer-eod-id", "NullTokenizer follows Megatron v0.13 (eod = --vocab-size)"},
    {"--null-tokenizer-pad-id", "NullTokenizer follows Megatron v0.13"},
    {"--find-optimal-num-workers", "worker benchmarking is not needed: threads share one pipeline"},
    {"--workers-to-check", "worker benchmarking is not supported"},
    {"--max-documents", "worker benchmarking is not supported"},
    {"--performance-dir", "worker benchmarking is not supported"},
    {"--multimodal", "multimodal datasets are not supported"},
};

cxxopts::Options make_options() {
  cxxopts::Options o(kProgram,
                     "Tokenize JSON lines into Megatron indexed datasets (.bin/.idx), byte for byte "
                     "like Megatron-LM's tools/preprocess_data.py; with --merge, concatenate "
                     "datasets like tools/merge_datasets.py.");
  o.custom_help("--input FILE... --output-prefix PREFIX --tokenizer-type TYPE [options]\n"
                "  mgt-tokenize --merge --input DIR|PREFIX... --output-prefix PREFIX");
  std::string types;
  for (const auto& t : mgt::supported_tokenizer_types()) types += (types.empty() ? "" : ", ") + t;
  // clang-format off
  o.add_options("input data")
      ("input", "JSON-lines inputs, in order: files, glob patterns (sorted matches), or - for "
                "standard input; gzip and zstd are decompressed (detected by content). With "
                "--merge: dataset prefixes or directories of datasets",
       cxxopts::value<std::vector<std::string>>(), "FILE...")
      ("json-keys", "Keys to extract from each JSON object, one output dataset per key "
                    "(default: text)",
       cxxopts::value<std::vector<std::string>>(), "KEY...")
      ("split-sentences", "Split documents into sentences (ICU rules in place of NLTK punkt); "
                          "outputs are named _sentence")
      ("keep-newlines", "With --split-sentences, keep the newlines between sentences");
  o.add_options("tokenizer")
      ("tokenizer-type", "One of: " + types, cxxopts::value<std::string>(), "TYPE")
      ("vocab-file", "Vocabulary file (GPT-2 vocab.json, BERT vocab.txt)",
       cxxopts::value<std::string>(), "FILE")
      ("merge-file", "GPT-2 BPE merges file", cxxopts::value<std::string>(), "FILE")
      ("vocab-size", "Vocabulary size (NullTokenizer)", cxxopts::value<std::int64_t>(), "N")
      ("vocab-extra-ids", "Accepted for compatibility; preprocess_data.py forces it to 0",
       cxxopts::value<int>()->default_value("0"), "N");
  o.add_options("tokenization process")
      ("append-eod", "Append the end-of-document token to each non-empty document")
      ("lang", "Sentence-splitting language (only english)",
       cxxopts::value<std::string>()->default_value("english"), "LANG");
  o.add_options("output data")
      ("output-prefix", "Output path without suffix: writes PREFIX_KEY_document.bin/.idx "
                        "(PREFIX.bin/.idx with --merge)",
       cxxopts::value<std::string>(), "PREFIX");
  o.add_options("runtime")
      ("workers", "Worker threads (default: the number of cores)",
       cxxopts::value<long long>(), "N")
      ("partitions", "Order documents as Megatron's round-robin --partitions N does",
       cxxopts::value<long long>()->default_value("1"), "N")
      ("log-interval", "Progress line every N documents when stderr is not a terminal",
       cxxopts::value<long long>()->default_value("1000"), "N")
      ("keep-sequential-samples", "With --partitions, keep input order (contiguous partitions)");
  o.add_options("mgt extensions")
      ("skip-bad-lines", "Skip bad lines (malformed JSON, missing key, ...) with a warning and "
                         "count them, instead of failing")
      ("merge", "Concatenate the datasets given by --input into --output-prefix")
      ("quiet", "No progress lines (the summary is still printed)")
      ("h,help", "Show this help");
  // clang-format on
  return o;
}

// Rewrites "--input a b c" as "--input=a --input=b --input=c" for cxxopts, checks every flag
// name, and refuses Megatron flags that are not implemented, naming them.
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
      if (arg.rfind("-", 0) == 0 && arg != "-")
        throw mgt::UsageError("unknown option '" + arg + "' (see --help)");
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
    while (i + 1 < argc && (argv[i + 1][0] != '-' || std::string(argv[i + 1]) == "-")) {
      out.push_back(name + "=" + argv[++i]);
      ++values;
    }
    if (values == 0) throw mgt::UsageError(name + " needs at least one value");
  }
  return out;
}

std::size_t non_negative(const cxxopts::ParseResult& r, const std::string& flag, long long minimum) {
  long long v = r[flag].as<long long>();
  if (v < minimum)
    throw mgt::UsageError("--" + flag + " must be at least " + std::to_string(minimum) + ", got " +
                          std::to_string(v));
  return static_cast<std::size_t>(v);
}

mgt::TokenizeOptions to_tokenize_options(const cxxopts::ParseResult& r) {
  mgt::TokenizeOptions o;
  if (r.count("input")) o.inputs = r["input"].as<std::vector<std::string>>();
  if (r.count("json-keys")) o.json_keys = r["json-keys"].as<std::vector<std::string>>();
  if (r.count("output-prefix")) o.output_prefix = r["output-prefix"].as<std::string>();
  if (r.count("tokenizer-type")) o.tokenizer.type = r["tokenizer-type"].as<std::string>();
  if (r.count("vocab-file")) o.tokenizer.vocab_file = r["vocab-file"].as<std::string>();
  if (r.count("merge-file")) o.tokenizer.merge_file = r["merge-file"].as<std::string>();
  if (r.count("vocab-size")) o.tokenizer.vocab_size = r["vocab-size"].as<std::int64_t>();
  o.tokenizer.vocab_extra_ids = r["vocab-extra-ids"].as<int>();
  o.append_eod = r.count("append-eod") > 0;
  o.split_sentences = r.count("split-sentences") > 0;
  o.keep_newlines = r.count("keep-newlines") > 0;
  o.lang = r["lang"].as<std::string>();
  if (r.count("workers")) o.workers = non_negative(r, "workers", 1);
  o.partitions = non_negative(r, "partitions", 1);
  o.log_interval = non_negative(r, "log-interval", 1);
  o.keep_sequential_samples = r.count("keep-sequential-samples") > 0;
  o.skip_bad_lines = r.count("skip-bad-lines") > 0;
  o.merge = r.count("merge") > 0;
  o.quiet = r.count("quiet") > 0;
  return o;
}

int run(int argc, char** argv) {
  cxxopts::Options options = make_options();
  std::vector<std::string> args = normalize_arguments(argc, argv, options);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cxxopts::ParseResult result = [&] {
    try {
      return options.parse(static_cast<int>(cargs.size()), cargs.data());
    } catch (const cxxopts::exceptions::exception& e) {
      throw mgt::UsageError(std::string(e.what()) + " (see --help)");
    }
  }();
  if (result.count("help")) {
    std::cout << options.help({"input data", "tokenizer", "tokenization process", "output data",
                               "runtime", "mgt extensions"})
              << "\nSee man mgt-tokenize(1) for outputs, exit codes and "
                                   "compatibility notes.\n";
    return mgt::kExitOk;
  }
  mgt::TokenizeOptions opts = [&] {
    try {
      return to_tokenize_options(result);
    } catch (const cxxopts::exceptions::exception& e) {
      throw mgt::UsageError(std::string(e.what()) + " (see --help)");
    }
  }();
  mgt::TokenizeSummary summary = opts.merge ? mgt::run_merge(opts) : mgt::run_tokenize(opts);
  std::fprintf(stderr, "%s\n", mgt::summary_text(summary).c_str());
  std::printf("%s\n", mgt::summary_json(summary).c_str());
  std::fflush(stdout);
  return mgt::kExitOk;
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
