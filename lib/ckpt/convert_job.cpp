#include "ckpt/convert_job.hpp"

#include <filesystem>
#include <memory>
#include <optional>

#include "ckpt/fresh_output_directory.hpp"
#include "ckpt/hf_model_directory.hpp"
#include "ckpt/model_checkpoint.hpp"
#include "ckpt/model_weights.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "data/python_json.hpp"
#include "model/memory_estimate.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/run_description.hpp"

namespace mgt {

namespace {

void check_options(const ConvertOptions& o) {
  for (const std::string* format : {&o.loader, &o.saver})
    if (*format != "mgt" && *format != "hf") throw UsageError("unknown checkpoint format '" + *format + "'");
  if (o.load_dir.empty()) throw UsageError("--load-dir is required: the checkpoint to convert");
  if (o.save_dir.empty()) throw UsageError("--save-dir is required: where to write the converted checkpoint");
  if (o.seq_length && o.loader != "hf")
    throw UsageError("--seq-length applies to --loader hf only (mgt checkpoints record theirs)");
  if ((!o.hf_model_type.empty() || o.hf_dtype || o.max_shard_bytes) && o.saver != "hf")
    throw UsageError("--hf-model-type, --hf-dtype and --max-shard-size apply to --saver hf only");
  if ((!o.vocab_file.empty() || !o.merge_file.empty()) && o.saver != "mgt")
    throw UsageError("--vocab-file and --merge-file apply to --saver mgt only (they name the tokenizer it records)");
  if (o.vocab_file.empty() != o.merge_file.empty())
    throw UsageError("--vocab-file and --merge-file go together (the GPT-2 BPE tokenizer needs both)");
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::weakly_canonical(o.load_dir, ec) == fs::weakly_canonical(o.save_dir, ec))
    throw UsageError("--save-dir must differ from --load-dir");
}

// The tokenizer description an mgt checkpoint records, from --vocab-file and --merge-file.
std::string gpt2_tokenizer_json(const ConvertOptions& o, std::int64_t padded_vocab) {
  TokenizerOptions t;
  t.type = "GPT2BPETokenizer";
  // Absolute, so that the checkpoint's record works from any working directory.
  t.vocab_file = std::filesystem::absolute(o.vocab_file).string();
  t.merge_file = std::filesystem::absolute(o.merge_file).string();
  const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(t);
  if (tokenizer->vocab_size() > padded_vocab)
    throw Error("the tokenizer of --vocab-file " + o.vocab_file + " has " + std::to_string(tokenizer->vocab_size()) +
                " tokens, more than the model's " + std::to_string(padded_vocab));
  return tokenizer_description_json(t, *tokenizer, padded_vocab);
}

// Before any tensor is read: a model whose copies cannot fit is refused with the numbers, as is
// a configuration whose sizes overflow (a config.json with n_layer 10^12).
void require_conversion_memory(const ConvertOptions& o) {
  HfReadOptions read_options;
  read_options.seq_length = o.seq_length;
  const GptConfig config =
      o.loader == "mgt" ? open_model_checkpoint(o.load_dir).config : read_hf_model_config(o.load_dir, read_options);
  MemoryEstimateRequest memory;
  memory.use = MemoryUse::kConversion;
  memory.seq_length = 1;
  check_memory(config, memory, available_host_memory(), "converting " + o.load_dir);
}

}  // namespace

ConvertResult convert_checkpoint(const ConvertOptions& o) {
  check_options(o);
  require_fresh_output_directory(o.save_dir);  // before the reading, which may take a while
  // An mgt checkpoint's directory is locked for the whole conversion, and removed again (or
  // emptied, if it existed) when the conversion fails: no partial output.
  std::optional<ckpt::FreshOutputDirectory> mgt_output;
  if (o.saver == "mgt") mgt_output.emplace(o.save_dir);
  require_conversion_memory(o);
  ModelWeights weights;
  if (o.loader == "mgt") {
    weights = read_mgt_model_weights(o.load_dir);
  } else {
    HfReadOptions read_options;
    read_options.seq_length = o.seq_length;
    weights = read_hf_model_directory(o.load_dir, read_options);
  }
  if (o.saver == "hf") require_hf_expressible(weights, o.hf_model_type);

  ConvertResult result;
  result.source = weights.source;
  result.vocabulary = resize_vocabulary(weights, o.true_vocab_size, o.make_vocab_size_divisible_by);
  result.tensors = static_cast<std::int64_t>(weights.tensors.size());
  result.parameters = weights.num_parameters();

  if (o.saver == "mgt") {
    if (!o.vocab_file.empty()) weights.tokenizer_json = gpt2_tokenizer_json(o, weights.config.padded_vocab_size);
    // A checkpoint read from another format starts a new history; an mgt one keeps its iteration.
    if (o.loader != "mgt") weights.iteration = 0;
    result.destination = write_mgt_model_weights(weights, o.save_dir);
    mgt_output->keep();
  } else {
    HfExportOptions export_options;
    if (o.hf_dtype) export_options.dtype = *o.hf_dtype;
    if (o.max_shard_bytes) export_options.max_shard_bytes = *o.max_shard_bytes;
    write_hf_model_directory(weights, o.save_dir, o.hf_model_type, export_options);
    result.destination = o.save_dir;
  }
  log::info("converted " + weights.source + " to " + result.destination + ": " + std::to_string(result.tensors) +
            " tensors, " + std::to_string(result.parameters) + " parameters");
  return result;
}

std::string convert_summary_json(const ConvertOptions& o, const ConvertResult& r) {
  PyValue source = PyValue::dict();
  source.set("format", PyValue::string(o.loader));
  source.set("path", PyValue::string(o.load_dir));
  source.set("read", PyValue::string(r.source));
  PyValue destination = PyValue::dict();
  destination.set("format", PyValue::string(o.saver));
  destination.set("path", PyValue::string(o.save_dir));
  destination.set("written", PyValue::string(r.destination));
  PyValue vocabulary = PyValue::dict();
  vocabulary.set("source_rows", PyValue::integer(r.vocabulary.source_rows));
  vocabulary.set("true_vocab_size",
                 r.vocabulary.true_vocab_size ? PyValue::integer(*r.vocabulary.true_vocab_size) : PyValue::none());
  vocabulary.set("destination_rows", PyValue::integer(r.vocabulary.destination_rows));
  PyValue summary = PyValue::dict();
  summary.set("source", std::move(source));
  summary.set("destination", std::move(destination));
  summary.set("tensors", PyValue::integer(r.tensors));
  summary.set("parameters", PyValue::integer(r.parameters));
  summary.set("vocabulary", std::move(vocabulary));
  return summary.dumps() + "\n";
}

}  // namespace mgt
