#include "data/tokenize_job.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <thread>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"
#include "core/signal_flag.hpp"
#include "data/dataset_outputs.hpp"
#include "data/document_encoder.hpp"
#include "data/indexed_dataset.hpp"
#include "data/input_stream.hpp"
#include "data/tokenize_pipeline.hpp"

namespace mgt {
namespace {

using Clock = std::chrono::steady_clock;

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void check_output_directory(const std::string& output_prefix) {
  std::string dir = parent_directory(output_prefix);
  if (!is_directory(dir))
    throw Error("output directory '" + dir + "' (of --output-prefix " + output_prefix +
                ") does not exist");
}

std::size_t default_workers() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Once `interrupt` holds a signal number, stops the run by throwing: unwinding removes every
// temporary, and nothing has been renamed into place yet wherever this is called.
void throw_if_interrupted(const std::atomic<int>* interrupt) {
  if (interrupt == nullptr) return;
  const int signal = interrupt->load(std::memory_order_relaxed);
  if (signal != 0)
    throw Error("interrupted by " + signal_name(signal) + "; no output written", signal_exit_code(signal));
}

std::string location(const InputLines& input, const LineBatch& batch, std::size_t line) {
  const auto& l = batch.lines[line];
  return input.display_name(l.file) + ":" + std::to_string(l.number);
}

// Writes the documents of one batch, in order, and reports its bad lines.
class BatchConsumer {
public:
  BatchConsumer(const TokenizeOptions& options, const InputLines& input, DatasetOutputs& outputs,
                TokenizeSummary& summary)
      : options_(options), input_(input), outputs_(outputs), summary_(summary) {}

  void operator()(const LineBatch& batch) {
    if (!batch.bad_lines.empty() && !options_.skip_bad_lines) {
      const auto& bad = batch.bad_lines.front();
      throw Error(location(input_, batch, bad.line) + ": " + bad.message +
                  " (use --skip-bad-lines to skip such lines)");
    }
    for (const auto& bad : batch.bad_lines) warn_bad_line(batch, bad);
    const std::size_t good = batch.lines.size() - batch.bad_lines.size();
    for (std::size_t k = 0; k < outputs_.key_count(); ++k) {
      const EncodedDocuments& e = batch.encoded[k];
      if (e.document_sequences.size() != good)
        throw Error("internal error: encoded document count does not match the batch");
      std::size_t token = 0, sequence = 0;
      for (std::uint32_t count : e.document_sequences) {
        std::span<const std::int32_t> lengths(e.sequence_lengths.data() + sequence, count);
        std::size_t n = 0;
        for (auto len : lengths) n += static_cast<std::size_t>(len);
        outputs_.add_document(k, std::span<const TokenId>(e.tokens.data() + token, n), lengths);
        token += n;
        sequence += count;
      }
    }
    summary_.lines += batch.lines.size();
    summary_.documents += good;
    summary_.bad_lines += batch.bad_lines.size();
    summary_.input_bytes += batch.stream_bytes;
    summary_.stored_bytes = batch.stored_position;
  }

private:
  void warn_bad_line(const LineBatch& batch, const LineBatch::BadLine& bad) {
    ++warned_;
    if (warned_ <= options_.max_warnings)
      log::warn(location(input_, batch, bad.line) + ": " + bad.message + " (line skipped)");
    if (warned_ == options_.max_warnings + 1)
      log::warn("more bad lines are skipped without a message; the summary counts them");
  }

  const TokenizeOptions& options_;
  const InputLines& input_;
  DatasetOutputs& outputs_;
  TokenizeSummary& summary_;
  std::size_t warned_ = 0;
};

void fill_output_summaries(const DatasetOutputs& outputs, const std::vector<std::string>& keys,
                           TokenizeSummary& summary) {
  for (std::size_t k = 0; k < outputs.key_count(); ++k) {
    const auto& w = outputs.writer(k);
    summary.outputs.push_back({k < keys.size() ? keys[k] : "", w.prefix(), w.document_count(),
                               w.sequence_count(), w.token_count(), w.bin_bytes()});
  }
}

// A merge input: a dataset prefix, or a directory standing for all datasets in it.
std::vector<std::string> merge_prefixes(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (std::string input : inputs) {
    if (is_directory(input)) {
      std::set<std::string> prefixes;  // sorted, as merge_datasets.py sorts them
      for (const auto& entry : std::filesystem::directory_iterator(input)) {
        if (!entry.is_regular_file()) continue;
        std::string ext = entry.path().extension().string();
        if (ext != ".bin" && ext != ".idx") continue;
        std::string prefix = (entry.path().parent_path() / entry.path().stem()).string();
        std::string pair = prefix + (ext == ".idx" ? ".bin" : ".idx");
        if (!is_regular_file(pair))
          throw Error(entry.path().string() + " has no matching " + pair);
        prefixes.insert(prefix);
      }
      if (prefixes.empty()) throw Error("no dataset (.bin/.idx pair) in directory '" + input + "'");
      out.insert(out.end(), prefixes.begin(), prefixes.end());
      continue;
    }
    for (const char* ext : {".idx", ".bin"}) {
      std::string e = ext;
      if (input.size() > e.size() && input.compare(input.size() - e.size(), e.size(), e) == 0 &&
          is_regular_file(input))
        input.resize(input.size() - e.size());
    }
    if (!is_regular_file(idx_path(input)) || !is_regular_file(bin_path(input)))
      throw Error("no dataset '" + input + "' (expected " + idx_path(input) + " and " +
                  bin_path(input) + ", or a directory of datasets)");
    out.push_back(input);
  }
  return out;
}

std::string format_rate(double bytes, double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", seconds > 0 ? bytes / seconds / 1e6 : 0.0);
  return buf;
}

std::string format_seconds(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", seconds);
  return buf;
}

}  // namespace

void validate_tokenize_options(const TokenizeOptions& o) {
  if (o.inputs.empty()) throw UsageError("--input is required");
  if (o.output_prefix.empty()) throw UsageError("--output-prefix is required");
  if (o.merge) return;
  if (o.json_keys.empty()) throw UsageError("--json-keys needs at least one key");
  std::set<std::string> seen;
  for (const auto& k : o.json_keys) {
    if (k.empty()) throw UsageError("--json-keys: empty key");
    if (!seen.insert(k).second) throw UsageError("--json-keys: key '" + k + "' given twice");
  }
  if (o.lang != "english")
    throw UsageError("--lang " + o.lang + " is not supported (only english: sentence splitting "
                     "uses ICU's rules for English)");
  if (o.partitions < 1) throw UsageError("--partitions must be at least 1");
  if (o.log_interval < 1) throw UsageError("--log-interval must be at least 1");
  if (o.batch_bytes < 1) throw UsageError("batch size must be at least 1 byte");
  if (std::count(o.inputs.begin(), o.inputs.end(), std::string(kStdinPath)) > 1)
    throw UsageError("standard input (-) can be read only once");
}

TokenizeSummary run_tokenize(const TokenizeOptions& options, const std::atomic<int>* interrupt) {
  validate_tokenize_options(options);
  if (options.merge) return run_merge(options, interrupt);
  const auto start = Clock::now();

  std::vector<std::string> paths = expand_input_paths(options.inputs);
  for (const auto& p : paths) {  // fail before any work rather than after the earlier files
    struct stat st {};
    if (p != kStdinPath && ::stat(p.c_str(), &st) != 0)
      throw Error(system_error_message("cannot open input", p));
    if (p != kStdinPath && S_ISDIR(st.st_mode)) throw Error("input '" + p + "' is a directory");
  }
  check_output_directory(options.output_prefix);
  // preprocess_data.py forces vocab_extra_ids = 0 whatever the flag says.
  TokenizerOptions tokenizer_options = options.tokenizer;
  tokenizer_options.vocab_extra_ids = 0;
  std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(tokenizer_options);
  throw_if_interrupted(interrupt);
  const DType dtype = optimal_dtype(tokenizer->vocab_size());
  if (options.tokenizer.vocab_extra_ids != 0)
    log::warn("--vocab-extra-ids is ignored: preprocess_data.py forces it to 0");
  if (options.keep_newlines && !options.split_sentences)
    log::warn("--keep-newlines has no effect without --split-sentences");
  if (options.tokenizer.type.rfind("Bert", 0) == 0 && !options.split_sentences && !options.quiet)
    log::info("Are you sure you don't want to split sentences?");  // as preprocess_data.py asks

  const std::string level = options.split_sentences ? "sentence" : "document";
  std::vector<std::string> prefixes;
  for (const auto& key : options.json_keys)
    prefixes.push_back(options.output_prefix + "_" + key + "_" + level);
  // Before the work: a name the outputs cannot be renamed to (a directory there) would otherwise
  // fail only after the whole input, possibly after another output had replaced its old dataset.
  for (const auto& prefix : prefixes) {
    check_atomic_destination(bin_path(prefix), "--output-prefix");
    check_atomic_destination(idx_path(prefix), "--output-prefix");
  }

  EncoderSettings settings;
  settings.json_keys = options.json_keys;
  settings.split_sentences = options.split_sentences;
  settings.keep_newlines = options.keep_newlines;
  settings.append_eod = options.append_eod;
  const std::size_t workers = options.workers > 0 ? options.workers : default_workers();
  std::vector<std::unique_ptr<DocumentEncoder>> encoders;
  for (std::size_t i = 0; i < workers; ++i)
    encoders.push_back(std::make_unique<DocumentEncoder>(*tokenizer, settings));

  if (!options.quiet) {
    log::info("mgt-tokenize: " + std::to_string(paths.size()) + " input(s), tokenizer " +
              tokenizer->class_name() + " (vocab " + std::to_string(tokenizer->vocab_size()) +
              ", dtype " + dtype_name(dtype) + "), " + std::to_string(workers) + " worker(s)");
    for (const auto& p : prefixes) log::info("Output: " + bin_path(p) + ", " + idx_path(p));
  }

  // Round-robin partitions reorder documents in Megatron; contiguous ones do not.
  const std::size_t partitions = options.keep_sequential_samples ? 1 : options.partitions;
  DatasetOutputs outputs(prefixes, dtype, partitions);
  TokenizeSummary summary;
  summary.dtype = dtype_name(dtype);
  InputLines input(paths);
  std::unique_ptr<Progress> progress;
  if (!options.quiet)
    progress = std::make_unique<Progress>("documents", total_input_size(paths), options.log_interval);

  BatchConsumer write_batch(options, input, outputs, summary);
  PipelineSettings pipeline;
  pipeline.batch_bytes = options.batch_bytes;
  pipeline.stop_at_bad_line = !options.skip_bad_lines;
  if (interrupt != nullptr) pipeline.poll = [interrupt] { throw_if_interrupted(interrupt); };
  run_tokenize_pipeline(input, encoders, pipeline, [&](const LineBatch& batch) {
    write_batch(batch);
    if (progress) progress->update(summary.documents, summary.stored_bytes);
  });
  summary.stored_bytes = input.stored_bytes_read();
  throw_if_interrupted(interrupt);
  outputs.commit();
  if (progress) progress->finish(summary.documents, summary.stored_bytes);
  summary.seconds = seconds_since(start);
  fill_output_summaries(outputs, options.json_keys, summary);
  return summary;
}

TokenizeSummary run_merge(const TokenizeOptions& options, const std::atomic<int>* interrupt) {
  if (options.inputs.empty()) throw UsageError("--input is required");
  if (options.output_prefix.empty()) throw UsageError("--output-prefix is required");
  const auto start = Clock::now();
  std::vector<std::string> prefixes = merge_prefixes(options.inputs);
  check_output_directory(options.output_prefix);

  std::unique_ptr<IndexedDatasetWriter> writer;
  TokenizeSummary summary;
  const auto check_interrupt = [interrupt] { throw_if_interrupted(interrupt); };
  for (const auto& prefix : prefixes) {
    check_interrupt();
    IndexedDataset dataset(prefix);
    if (!writer) {
      writer = std::make_unique<IndexedDatasetWriter>(options.output_prefix, dataset.dtype());
      summary.dtype = dtype_name(dataset.dtype());
    }
    if (!options.quiet)
      log::info("Merging " + prefix + " (" + std::to_string(dataset.document_count()) +
                " documents, " + std::to_string(dataset.sequence_count()) + " sequences)");
    writer->add_index(dataset, check_interrupt);
    summary.input_bytes += dataset.bin_bytes().size();
    summary.stored_bytes += dataset.bin_bytes().size();
  }
  writer->finish();
  check_interrupt();
  writer->commit();
  summary.documents = writer->document_count();
  summary.lines = summary.documents;
  summary.seconds = seconds_since(start);
  summary.outputs.push_back({"", writer->prefix(), writer->document_count(), writer->sequence_count(),
                             writer->token_count(), writer->bin_bytes()});
  return summary;
}

std::string summary_json(const TokenizeSummary& s) {
  std::string out = "{";
  out += "\"documents\": " + std::to_string(s.documents);
  out += ", \"lines\": " + std::to_string(s.lines);
  out += ", \"bad_lines\": " + std::to_string(s.bad_lines);
  out += ", \"input_bytes\": " + std::to_string(s.input_bytes);
  out += ", \"stored_bytes\": " + std::to_string(s.stored_bytes);
  out += ", \"seconds\": " + format_seconds(s.seconds);
  out += ", \"mb_per_s\": " + format_rate(static_cast<double>(s.input_bytes), s.seconds);
  out += ", \"dtype\": " + json_quote(s.dtype);
  out += ", \"outputs\": [";
  for (std::size_t i = 0; i < s.outputs.size(); ++i) {
    const auto& o = s.outputs[i];
    if (i > 0) out += ", ";
    out += "{\"key\": " + json_quote(o.key) + ", \"prefix\": " + json_quote(o.prefix) +
           ", \"documents\": " + std::to_string(o.documents) +
           ", \"sequences\": " + std::to_string(o.sequences) +
           ", \"tokens\": " + std::to_string(o.tokens) +
           ", \"bin_bytes\": " + std::to_string(o.bin_bytes) + "}";
  }
  out += "]}";
  return out;
}

std::string summary_text(const TokenizeSummary& s) {
  std::uint64_t sequences = 0, tokens = 0, bytes = 0;
  for (const auto& o : s.outputs) {
    sequences += o.sequences;
    tokens += o.tokens;
    bytes += o.bin_bytes;
  }
  std::string out = "Done: " + std::to_string(s.documents) + " documents, " +
                    std::to_string(sequences) + " sequences, " + std::to_string(tokens) +
                    " tokens (" + std::to_string(bytes) + " bytes of " + s.dtype + ") from " +
                    std::to_string(s.input_bytes) + " input bytes in " + format_seconds(s.seconds) +
                    " s (" + format_rate(static_cast<double>(s.input_bytes), s.seconds) + " MB/s)";
  if (s.bad_lines > 0) out += "; " + std::to_string(s.bad_lines) + " bad lines skipped";
  return out;
}

}  // namespace mgt
