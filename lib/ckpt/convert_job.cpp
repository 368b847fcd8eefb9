#include "ckpt/convert_job.hpp"

#include <filesystem>
#include <memory>
#include <optional>

#include "ckpt/checkpoint_reshard.hpp"
#include "ckpt/fresh_output_directory.hpp"
#include "ckpt/hf_model_directory.hpp"
#include "ckpt/model_checkpoint.hpp"
#include "ckpt/model_weights.hpp"
#include "ckpt/sharded_checkpoint.hpp"
#include "ckpt/tokenizer_description.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "data/python_json.hpp"
#include "model/memory_estimate.hpp"
#include "model/parameter_table.hpp"
#include "tokenizer/tokenizer.hpp"

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
  if ((o.target_tensor_parallel_size || o.target_pipeline_parallel_size || o.target_data_parallel_size ||
       o.target_distributed_optimizer) &&
      o.saver != "mgt")
    throw UsageError("--target-tensor-parallel-size, --target-pipeline-parallel-size, --target-data-parallel-size and "
                     "--target-use-distributed-optimizer apply to --saver mgt only (a Hugging Face export holds whole "
                     "tensors)");
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

// The given target sizes over `base` (the source's layout, or one rank).
ckpt::TargetLayout target_layout(const ConvertOptions& o, ckpt::TargetLayout base) {
  if (o.target_tensor_parallel_size) base.tensor_parallel_size = *o.target_tensor_parallel_size;
  if (o.target_pipeline_parallel_size) base.pipeline_parallel_size = *o.target_pipeline_parallel_size;
  if (o.target_data_parallel_size) base.data_parallel_size = *o.target_data_parallel_size;
  if (o.target_distributed_optimizer) base.distributed_optimizer = *o.target_distributed_optimizer;
  return base;
}

// mgt to mgt with nothing to change but the layout: tensor by tensor, optimizer state included.
bool streams(const ConvertOptions& o) {
  return o.loader == "mgt" && o.saver == "mgt" && !o.true_vocab_size && !o.make_vocab_size_divisible_by &&
         o.vocab_file.empty();
}

ConvertResult stream_checkpoint(const ConvertOptions& o) {
  ckpt::FreshOutputDirectory output(o.save_dir);
  const ModelCheckpoint opened = open_model_checkpoint(o.load_dir);
  const ckpt::TargetLayout layout = target_layout(o, ckpt::stored_layout(ckpt::ShardedCheckpoint(opened.directory)));
  const ckpt::ReshardResult r = ckpt::reshard_checkpoint(o.load_dir, o.save_dir, layout);
  output.keep();
  ConvertResult result;
  result.source = "checkpoint " + r.source;
  result.destination = r.destination;
  result.tensors = r.tensors;
  const ParameterTable table = gpt_parameter_table(opened.config);
  for (const ParameterEntry& e : table.entries) result.parameters += e.global_numel();
  result.vocabulary.source_rows = opened.config.padded_vocab_size;
  result.vocabulary.destination_rows = opened.config.padded_vocab_size;
  result.source_layout = r.source_layout;
  result.target_layout = layout;
  result.streamed = true;
  result.bytes = r.bytes_read;
  result.seconds = r.seconds;
  return result;
}

PyValue layout_json(const ckpt::TargetLayout& l) {
  PyValue v = PyValue::dict();
  v.set("tensor_model_parallel_size", PyValue::integer(l.tensor_parallel_size));
  v.set("pipeline_model_parallel_size", PyValue::integer(l.pipeline_parallel_size));
  v.set("data_parallel_size", PyValue::integer(l.data_parallel_size));
  v.set("use_distributed_optimizer", PyValue::boolean(l.distributed_optimizer));
  return v;
}

}  // namespace

ConvertResult convert_checkpoint(const ConvertOptions& o) {
  check_options(o);
  if (streams(o)) {
    require_fresh_output_directory(o.save_dir);
    return stream_checkpoint(o);
  }
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
    ckpt::TargetLayout base;
    if (o.loader == "mgt") {
      base = ckpt::stored_layout(ckpt::ShardedCheckpoint(open_model_checkpoint(o.load_dir).directory));
      result.source_layout = base;
    }
    ckpt::TargetLayout layout = target_layout(o, base);
    // Weights only: no optimizer state to spread over data-parallel ranks.
    layout.distributed_optimizer = false;
    result.target_layout = layout;
    result.destination = write_mgt_model_weights(weights, o.save_dir, layout);
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
  if (r.source_layout) summary.set("source_layout", layout_json(*r.source_layout));
  if (r.target_layout) summary.set("target_layout", layout_json(*r.target_layout));
  summary.set("optimizer_state", PyValue::boolean(r.streamed));
  if (r.streamed) {
    summary.set("bytes", PyValue::integer(static_cast<std::int64_t>(r.bytes)));
    summary.set("seconds", PyValue::real(r.seconds));
    summary.set("gb_per_second", PyValue::real(r.seconds > 0 ? static_cast<double>(r.bytes) / 1e9 / r.seconds : 0.0));
  }
  return summary.dumps() + "\n";
}

}  // namespace mgt
