// mgt-tokenize: Megatron's tools/preprocess_data.py (JSON lines → {prefix}_{key}_{level}.bin/.idx,
// byte for byte) and tools/merge_datasets.py (concatenating datasets), as library entry points.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace mgt {

struct TokenizeOptions {
  // Input and output (Megatron's flags and defaults).
  std::vector<std::string> inputs;           // --input: files, globs, "-" for stdin
  std::string output_prefix;                 // --output-prefix
  std::vector<std::string> json_keys{"text"};  // --json-keys
  TokenizerOptions tokenizer;                // --tokenizer-type, --vocab-file, --merge-file, ...
  bool append_eod = false;                   // --append-eod
  bool split_sentences = false;              // --split-sentences
  bool keep_newlines = false;                // --keep-newlines
  std::string lang = "english";              // --lang
  std::size_t workers = 0;                   // --workers (0: one per core)
  std::size_t partitions = 1;                // --partitions
  bool keep_sequential_samples = false;      // --keep-sequential-samples
  std::uint64_t log_interval = 1000;         // --log-interval

  // mgt's own.
  bool skip_bad_lines = false;     // skip and count bad lines instead of failing
  std::size_t max_warnings = 20;   // bad lines reported one by one before going quiet
  bool merge = false;              // --merge: inputs are datasets (prefixes or directories)
  bool quiet = false;              // no progress lines
  std::size_t batch_bytes = 1 << 20;  // lines per work item, by size (tests use small batches)
};

struct OutputSummary {
  std::string key;     // the JSON key ("" when merging)
  std::string prefix;  // PREFIX of PREFIX.bin/.idx
  std::uint64_t documents = 0, sequences = 0, tokens = 0, bin_bytes = 0;
};

struct TokenizeSummary {
  std::uint64_t lines = 0;          // lines read (documents + bad lines)
  std::uint64_t documents = 0;      // per key (the same for every key)
  std::uint64_t bad_lines = 0;      // skipped with skip_bad_lines
  std::uint64_t input_bytes = 0;    // decompressed JSON bytes
  std::uint64_t stored_bytes = 0;   // bytes read from the inputs as stored
  double seconds = 0;
  std::string dtype;
  std::vector<OutputSummary> outputs;
};

// Checks the options that do not depend on files; throws mgt::UsageError.
void validate_tokenize_options(const TokenizeOptions& options);

// Runs preprocess_data.py's work. Throws mgt::Error; "FILE:LINE: what" for a bad input line
// (unless skip_bad_lines). Outputs appear under their final names only when everything
// succeeded; a failed run leaves no output file behind.
// interrupt: polled throughout (a SignalFlag's flag); once it holds a signal number the run
// stops, removes what it wrote and throws mgt::Error "interrupted by SIGINT; no output
// written" with exit code 128 + the signal.
TokenizeSummary run_tokenize(const TokenizeOptions& options, const std::atomic<int>* interrupt = nullptr);

// merge_datasets.py: the datasets named by options.inputs (a directory stands for every
// PREFIX.bin/.idx pair in it, sorted by name, as merge_datasets.py takes them) concatenated into
// options.output_prefix. interrupt: as for run_tokenize.
TokenizeSummary run_merge(const TokenizeOptions& options, const std::atomic<int>* interrupt = nullptr);

// The summary as one JSON object (for stdout) and as human-readable lines (for stderr).
std::string summary_json(const TokenizeSummary& summary);
std::string summary_text(const TokenizeSummary& summary);

}  // namespace mgt
