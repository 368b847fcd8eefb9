#include "data/tokenize_command_line.hpp"

#include <climits>
#include <map>

#include "core/cxxopts_command_line.hpp"
#include "core/error.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/tokenizer_flags.hpp"
#include "tokenizer/tokenizer_type_inference.hpp"

namespace mgt {

namespace {

constexpr const char* kProgram = "mgt-tokenize";

// Lists as Megatron's argparse nargs='+' takes them; unlike argparse, a repeated flag adds to the
// earlier values ("--input a.jsonl --input b.jsonl").
const std::map<std::string, FlagArity> kListFlags = {{"--input", FlagArity::ManyAppending},
                                                     {"--json-keys", FlagArity::ManyAppending}};

// Megatron flags mgt-tokenize knows but does not implement, with the reason.
const std::map<std::string, std::string> kRefusedFlags = {
    {"--tokenizer-metadata", "HEAD's TokenizerConfig flags are not supported"},
    {"--tokenizer-special-tokens", "HEAD's TokenizerConfig flags are not supported"},
    {"--tokenizer-hf-no-use-fast", "HEAD's TokenizerConfig flags are not supported"},
    {"--tokenizer-hf-no-include-special-tokens", "HEAD's TokenizerConfig flags are not supported"},
    {"--trust-remote-code", "HuggingFaceTokenizer reads tokenizer.json only and runs no remote code"},
    {"--chat-template", "HEAD's TokenizerConfig flags are not supported"},
    {"--null-tokenizer-eod-id", "NullTokenizer follows Megatron v0.13 (eod = --vocab-size)"},
    {"--null-tokenizer-pad-id", "NullTokenizer follows Megatron v0.13"},
    {"--find-optimal-num-workers", "worker benchmarking is not needed: threads share one pipeline"},
    {"--workers-to-check", "worker benchmarking is not supported"},
    {"--max-documents", "worker benchmarking is not supported"},
    {"--performance-dir", "worker benchmarking is not supported"},
    {"--multimodal", "multimodal datasets are not supported"},
};

const std::vector<std::string> kHelpGroups = {"input data", "tokenizer", "tokenization process",
                                              "output data", "runtime", "mgt extensions"};

cxxopts::Options make_options() {
  cxxopts::Options o(kProgram,
                     "Tokenize JSON lines into Megatron indexed datasets (.bin/.idx), byte for byte "
                     "like Megatron-LM's tools/preprocess_data.py; with --merge, concatenate "
                     "datasets like tools/merge_datasets.py.");
  o.custom_help("--input FILE... --output-prefix PREFIX --tokenizer-type TYPE [options]\n"
                "  mgt-tokenize --merge --input DIR|PREFIX... --output-prefix PREFIX");
  std::string types;
  for (const auto& t : supported_tokenizer_types()) types += (types.empty() ? "" : ", ") + t;
  // Numbers are declared as strings and parsed by FlagValues, so that a bad value names its flag.
  // clang-format off
  o.add_options("input data")
      ("input", "JSON-lines inputs, in order: files, glob patterns (sorted matches), or - for "
                "standard input; gzip and zstd are decompressed (detected by content). With "
                "--merge: dataset prefixes or directories of datasets (required)",
       cxxopts::value<std::vector<std::string>>(), "FILE...")
      ("json-keys", "Keys to extract from each JSON object, one output dataset per key "
                    "(default: text)",
       cxxopts::value<std::vector<std::string>>(), "KEY...")
      ("split-sentences", "Split documents into sentences (ICU rules in place of NLTK punkt); "
                          "outputs are named _sentence")
      ("keep-newlines", "With --split-sentences, keep the newlines between sentences");
  o.add_options("tokenizer")
      ("tokenizer-type", "One of: " + types + " (required without --merge, unless --vocab-file and "
                         "--merge-file name GPT2BPETokenizer)", cxxopts::value<std::string>(), "TYPE")
      ("vocab-file", "Vocabulary file (GPT-2 vocab.json, BERT vocab.txt)",
       cxxopts::value<std::string>(), "FILE")
      ("merge-file", "GPT-2 BPE merges file", cxxopts::value<std::string>(), "FILE")
      ("vocab-size", "Vocabulary size of NullTokenizer, or of TikTokenizer (default: 131072 for TikTokenizer)",
       cxxopts::value<std::string>(), "N")
      ("vocab-extra-ids", "Accepted for compatibility; preprocess_data.py forces it to 0",
       cxxopts::value<std::string>()->default_value("0"), "N");
  add_tokenizer_model_flags(o, "tokenizer");
  o.add_options("tokenization process")
      ("append-eod", "Append the end-of-document token to each non-empty document")
      ("lang", "Sentence-splitting language (only english)",
       cxxopts::value<std::string>()->default_value("english"), "LANG");
  o.add_options("output data")
      ("output-prefix", "Output path without suffix: writes PREFIX_KEY_document.bin/.idx "
                        "(PREFIX.bin/.idx with --merge) (required)",
       cxxopts::value<std::string>(), "PREFIX");
  o.add_options("runtime")
      ("workers", "Worker threads (default: the number of cores)",
       cxxopts::value<std::string>(), "N")
      ("partitions", "Order documents as Megatron's round-robin --partitions N does",
       cxxopts::value<std::string>()->default_value("1"), "N")
      ("log-interval", "Progress line every N documents when stderr is not a terminal",
       cxxopts::value<std::string>()->default_value("1000"), "N")
      ("keep-sequential-samples", "With --partitions, keep input order (contiguous partitions)");
  o.add_options("mgt extensions")
      ("skip-bad-lines", "mgt: skip bad lines (malformed JSON, missing key, ...) with a warning and "
                         "count them, instead of failing")
      ("merge", "mgt: concatenate the datasets given by --input into --output-prefix")
      ("quiet", "mgt: no progress lines (the summary is still printed)")
      ("h,help", "Show this help");
  // clang-format on
  add_version_flag(o, "mgt extensions");
  return o;
}

std::size_t at_least(const FlagValues& f, const char* flag, std::int64_t minimum) {
  const std::int64_t v = f.integer(flag);
  if (v < minimum)
    throw UsageError(std::string("--") + flag + " must be at least " + std::to_string(minimum) +
                     ", got " + std::to_string(v));
  return static_cast<std::size_t>(v);
}

TokenizeOptions to_tokenize_options(const FlagValues& f) {
  TokenizeOptions o;
  f.set("input", o.inputs);
  f.set("json-keys", o.json_keys);
  f.set("output-prefix", o.output_prefix);
  f.set("tokenizer-type", o.tokenizer.type);
  f.set("vocab-file", o.tokenizer.vocab_file);
  f.set("merge-file", o.tokenizer.merge_file);
  if (f.has("vocab-size")) o.tokenizer.vocab_size = f.integer("vocab-size");
  const std::int64_t extra = f.integer("vocab-extra-ids");
  if (extra < INT_MIN || extra > INT_MAX)
    throw UsageError("--vocab-extra-ids: '" + f.text("vocab-extra-ids") + "' is out of range");
  o.tokenizer.vocab_extra_ids = static_cast<int>(extra);
  set_tokenizer_model_flags(f, o.tokenizer);
  infer_tokenizer_type_from_files(o.tokenizer, kProgram);
  f.set("append-eod", o.append_eod);
  f.set("split-sentences", o.split_sentences);
  f.set("keep-newlines", o.keep_newlines);
  o.lang = f.text("lang");
  if (f.has("workers")) o.workers = at_least(f, "workers", 1);
  o.partitions = at_least(f, "partitions", 1);
  o.log_interval = at_least(f, "log-interval", 1);
  f.set("keep-sequential-samples", o.keep_sequential_samples);
  f.set("skip-bad-lines", o.skip_bad_lines);
  f.set("merge", o.merge);
  f.set("quiet", o.quiet);
  return o;
}

}  // namespace

TokenizeCommandLine parse_tokenize_command_line(int argc, const char* const* argv) {
  cxxopts::Options options = make_options();
  std::map<std::string, FlagArity> lists = kListFlags;
  lists.merge(tokenizer_model_list_flags());
  const CommandLineRules rules{declared_flags(options, lists), kRefusedFlags, false};
  const cxxopts::ParseResult result = parse_command_line(options, argc, argv, rules, kProgram).flags;
  TokenizeCommandLine command;
  if (result.count("help")) {
    command.show_help = true;
    return command;
  }
  command.options = to_tokenize_options(FlagValues(result));
  return command;
}

std::string tokenize_help() {
  return make_options().help(kHelpGroups) +
         "\nSee man mgt-tokenize(1) for outputs, exit codes and compatibility notes.\n";
}

}  // namespace mgt
