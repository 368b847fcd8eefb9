// mgt-ckpt-convert's work: load a model with one format's loader, optionally change its
// vocabulary rows, save it with another format's saver, and report what was done. Formats:
// "mgt" (mgt's HDF5 checkpoints, any parallel layout) and "hf" (a Hugging Face GPT-2, Llama or
// Mistral directory). mgt to mgt without vocabulary changes streams tensor by tensor and keeps
// the optimizer state (checkpoint_reshard.hpp); the other conversions hold the weights in memory.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "ckpt/layout_shard_writers.hpp"
#include "ckpt/safetensors_format.hpp"
#include "ckpt/vocabulary_resize.hpp"

namespace mgt {

struct ConvertOptions {
  std::string loader;  // "mgt" | "hf" (aliases resolved by the command line)
  std::string saver;   // "mgt" | "hf"
  std::string load_dir;
  std::string save_dir;
  std::optional<std::int64_t> true_vocab_size;
  std::optional<std::int64_t> make_vocab_size_divisible_by;
  std::optional<std::int64_t> seq_length;  // --loader hf: the model's --seq-length (default: its largest position)
  std::string vocab_file;                  // --saver mgt: the GPT-2 BPE tokenizer to record
  std::string merge_file;
  // --saver hf: the architecture (gpt2, llama, mistral; empty: as read, or what the model is),
  // the dtype of the weights and the largest safetensors file before sharding.
  std::string hf_model_type;
  std::optional<ckpt::SafetensorsDType> hf_dtype;
  std::optional<std::uint64_t> max_shard_bytes;
  // --saver mgt: the layout to write (Megatron's --target-tensor-parallel-size,
  // --target-pipeline-parallel-size; mgt adds the data-parallel layout of the distributed
  // optimizer's state). Unset: as stored in an mgt source (convert.py keeps the source's sizes),
  // one rank for a Hugging Face source.
  std::optional<int> target_tensor_parallel_size;
  std::optional<int> target_pipeline_parallel_size;
  std::optional<int> target_data_parallel_size;
  std::optional<bool> target_distributed_optimizer;
};

struct ConvertResult {
  std::string source;       // what was read ("checkpoint DIR/iter_0000010", "Llama model DIR")
  std::string destination;  // the directory written (an mgt iteration directory, or the HF directory)
  std::int64_t tensors = 0;
  std::int64_t parameters = 0;
  VocabularyChange vocabulary;
  // --saver mgt: the layouts read and written; whether the optimizer state went along (a
  // streamed mgt-to-mgt conversion), and what was moved how fast.
  std::optional<ckpt::TargetLayout> source_layout;
  std::optional<ckpt::TargetLayout> target_layout;
  bool streamed = false;
  std::uint64_t bytes = 0;
  double seconds = 0.0;
};

// Throws mgt::Error (runtime) or mgt::UsageError (options that do not fit together).
ConvertResult convert_checkpoint(const ConvertOptions& options);

// One JSON object describing the conversion, for standard output.
std::string convert_summary_json(const ConvertOptions& options, const ConvertResult& result);

}  // namespace mgt
