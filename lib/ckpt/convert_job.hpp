// mgt-ckpt-convert's work: load a model with one format's loader, optionally change its
// vocabulary rows, save it with another format's saver, and report what was done. Formats:
// "mgt" (mgt's HDF5 checkpoints, one shard) and "hf" (a Hugging Face GPT-2, Llama or Mistral
// directory).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

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
};

struct ConvertResult {
  std::string source;       // what was read ("checkpoint DIR/iter_0000010", "Llama model DIR")
  std::string destination;  // the directory written (an mgt iteration directory, or the HF directory)
  std::int64_t tensors = 0;
  std::int64_t parameters = 0;
  VocabularyChange vocabulary;
};

// Throws mgt::Error (runtime) or mgt::UsageError (options that do not fit together).
ConvertResult convert_checkpoint(const ConvertOptions& options);

// One JSON object describing the conversion, for standard output.
std::string convert_summary_json(const ConvertOptions& options, const ConvertResult& result);

}  // namespace mgt
