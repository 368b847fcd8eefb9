#include "data/tokenize_command_line.hpp"

#include <map>
#include <set>

#include "core/cxxopts_command_line.hpp"
#include "core/error.hpp"
#include "core/megatron_compatibility.hpp"
#include "tokenizer/tokenizer_flags.hpp"
#include "tokenizer/tokenizer_type_inference.hpp"

namespace mgt {

namespace {

constexpr const char* kProgram = "mgt-tokenize";

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

// preprocess_data.py's flags until 2023, accepted so that its scripts of that time run unchanged
// and named on the start-up line: --dataset-impl chose the output format (mmap is the one Megatron
// kept, and the one written) and --chunk-size the documents a worker process takes at a time.
const std::map<std::string, IgnoredFlag>& older_script_flags() {
  const std::string old_format = "the old IndexedDataset format is no longer written, nor read by Megatron; "
                                 "mgt-tokenize writes the mmap format (drop the flag)";
  static const std::map<std::string, IgnoredFlag> flags = {
      {"--dataset-impl",
       {FlagArity::One, "mmap is the format written", {"mmap"}, false, {{"lazy", old_format}, {"cached", old_format}}}},
      {"--chunk-size",
       {FlagArity::One, "worker threads take batches of about 1 MB of lines; the output is the same", {}, true, {}}},
  };
  return flags;
}

// The flags of preprocess_data.py before April 2023, when scripts abbreviated them: "--vocab" was
// --vocab-file's prefix alone until --vocab-size (NullTokenizer) came, so it stands for it here.
const std::vector<std::string> kAbbreviatedParserFlags = {
    "--input", "--json-keys", "--split-sentences", "--keep-newlines", "--tokenizer-type", "--vocab-file",
    "--merge-file", "--append-eod", "--lang", "--tokenizer-model", "--output-prefix", "--dataset-impl",
    "--workers", "--chunk-size", "--log-interval"};

const std::vector<std::string> kHelpGroups = {"input data", "tokenizer", "tokenization process",
                                              "output data", "runtime", "mgt extensions"};

cxxopts::Options make_options() {
  cxxopts::Options o(kProgram,
                     "Tokenize JSON lines into Megatron indexed datasets (.bin/.idx), byte for byte "
                     "like Megatron-LM's tools/preprocess_data.py; with --merge, concatenate "
                     "datasets like tools/merge_datasets.py.");
  o.custom_help("--input FILE... --output-prefix PREFIX --tokenizer-type TYPE [options]\n"
                "  mgt-tokenize --merge --input DIR|PREFIX... --output-prefix PREFIX");
  TokenizeOptions defaults;  // --help describes the defaults
  declare_flags(o, tokenize_flags(defaults));
  o.add_options("mgt extensions")("h,help", "Show this help");
  add_version_flag(o, "mgt extensions");
  return o;
}

CommandLineRules command_line_rules() {
  TokenizeOptions defaults;
  CommandLineRules rules{flag_arities(tokenize_flags(defaults)), kRefusedFlags, false, older_script_flags()};
  rules.known["--version"] = FlagArity::None;  // answered before parsing (core/program_main.hpp)
  // preprocess_data.py's parser keeps argparse's allow_abbrev.
  rules.allow_abbreviations = true;
  rules.abbreviation_precedence = kAbbreviatedParserFlags;
  return rules;
}

// The tokenizer flags are every program's (tokenizer/tokenizer_flags.hpp); three say more here.
std::vector<FlagDefinition> tokenizer_flags_here(TokenizerOptions& tokenizer) {
  std::vector<FlagDefinition> flags;
  for (FlagDefinition& f : tokenizer_flags(tokenizer, TokenizerFlagsRole::kNamesTokenizer)) {
    const std::string help = f.description();
    if (f.name() == "tokenizer-type")
      flags.push_back(std::move(f).described_as(help.substr(0, help.find(" (required")) +
                                                " (required without --merge, unless --vocab-file and --merge-file name "
                                                "GPT2BPETokenizer)"));
    else if (f.name() == "vocab-file")
      flags.push_back(std::move(f).described_as(help + " (GPT-2 vocab.json, BERT vocab.txt)"));
    else if (f.name() == "vocab-extra-ids")
      flags.push_back(std::move(f).described_as("Accepted for compatibility; preprocess_data.py forces it to 0"));
    else
      flags.push_back(std::move(f));
  }
  return flags;
}

}  // namespace

// Ranges of the numbers: core/flag_ranges.cpp. Unlike argparse, a repeated list flag adds to the
// earlier values ("--input a.jsonl --input b.jsonl"). preprocess_data.py's flags are Megatron's
// though not its pretraining parser's, hence megatron_flag().
// clang-format off
std::vector<FlagDefinition> tokenize_flags(TokenizeOptions& o) {
  return flag_groups({
    {"input data", {
      store_list("input", "FILE...", o.inputs, "JSON-lines inputs, in order: files, glob patterns (sorted matches), or - "
                 "for standard input; gzip and zstd are decompressed (detected by content). With --merge: dataset "
                 "prefixes or directories of datasets").required().appending().megatron_flag(),
      store_list("json-keys", "KEY...", o.json_keys, "Keys to extract from each JSON object, one output dataset per key")
          .appending().megatron_flag(),
      store_true("split-sentences", o.split_sentences, "Split documents into sentences (ICU rules in place of NLTK "
                 "punkt); outputs are named _sentence").megatron_flag(),
      store_true("keep-newlines", o.keep_newlines, "With --split-sentences, keep the newlines between sentences").megatron_flag(),
    }},
    {"tokenizer", tokenizer_flags_here(o.tokenizer)},
    {"tokenization process", {
      store_true("append-eod", o.append_eod, "Append the end-of-document token to each non-empty document").megatron_flag(),
      store("lang", "LANG", o.lang, "Sentence-splitting language (only english)").megatron_flag(),
    }},
    {"output data", {
      store("output-prefix", "PREFIX", o.output_prefix, "Output path without suffix: writes PREFIX_KEY_document.bin/.idx "
            "(PREFIX.bin/.idx with --merge)").required().megatron_flag(),
    }},
    {"runtime", {
      // 0 stands for None: Megatron requires the flag.
      custom_flag("workers", FlagArity::One, "N", "Worker threads",
                  [&o](const std::vector<std::string>& v) {
                    // Each worker holds its own tokenizer and batches: a mistyped count would
                    // exhaust memory before the first line.
                    constexpr std::int64_t kMostWorkers = 4096;
                    const std::int64_t n = parse_integer_flag("--workers", v.at(0));
                    if (n < 1 || n > kMostWorkers)
                      throw UsageError("--workers " + v.at(0) + ": give 1 to " + std::to_string(kMostWorkers));
                    o.workers = static_cast<std::size_t>(n);
                  },
                  [&o] { return o.workers ? ArgValue(static_cast<std::int64_t>(o.workers)) : ArgValue(); })
          .default_text("the number of cores").megatron_flag(),
      store("partitions", "N", o.partitions, "Order documents as Megatron's round-robin --partitions N does").megatron_flag(),
      store("log-interval", "N", o.log_interval, "Progress line every N documents when stderr is not a terminal"),
      store_true("keep-sequential-samples", o.keep_sequential_samples, "With --partitions, keep input order (contiguous "
                 "partitions)").megatron_flag(),
    }},
    {"mgt extensions", {
      store_true("skip-bad-lines", o.skip_bad_lines, "skip bad lines (malformed JSON, missing key, ...) with a warning and "
                 "count them, instead of failing"),
      store_true("merge", o.merge, "concatenate the datasets given by --input into --output-prefix"),
      store_true("quiet", o.quiet, "no progress lines (start-up notes and the summary are still printed)"),
    }},
  });
}
// clang-format on

namespace {

}  // namespace

TokenizeCommandLine parse_tokenize_command_line(int argc, const char* const* argv) {
  cxxopts::Options options = make_options();
  ParsedCommandLine parsed = parse_command_line(options, argc, argv, command_line_rules(), kProgram);
  TokenizeCommandLine command;
  if (parsed.flags.count("help")) {
    command.show_help = true;
    return command;
  }
  command.ignored = std::move(parsed.ignored);
  // --input and --output-prefix are required; what needs the options as a whole is
  // validate_tokenize_options's job.
  const FlagValues given(parsed.flags);
  const std::vector<FlagDefinition> flags = tokenize_flags(command.options);
  set_given_flags(flags, given);
  if (command.options.merge) {
    // merge_datasets.py takes --input and --output-prefix alone: a tokenizing flag beside
    // --merge would do nothing (no EOD appended, no sentences split), so it is refused.
    const std::set<std::string> merge_flags = {"input", "output-prefix", "merge", "quiet"};
    std::string unused;
    for (const FlagDefinition& f : flags)
      if (!merge_flags.count(f.name()) && given.has(f.name().c_str())) unused += (unused.empty() ? "" : ", ") + f.flag();
    if (!unused.empty())
      throw UsageError(unused + ": tokenizing flags mean nothing with --merge, which concatenates datasets as "
                       "merge_datasets.py does (--input and --output-prefix alone)");
    return command;
  }
  infer_tokenizer_type_from_files(command.options.tokenizer, kProgram);
  return command;
}

std::string tokenize_help() {
  return make_options().help(kHelpGroups) + "\n" + ignored_flags_help(command_line_rules()) +
         "\nA flag may be abbreviated to a unique prefix, as preprocess_data.py's parser allows (--vocab for "
         "--vocab-file).\nSee man mgt-tokenize(1) for outputs, exit codes and compatibility notes.\n";
}

}  // namespace mgt
