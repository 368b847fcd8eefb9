// A model on its way from a loader to a saver, as Megatron's convert.py hands it over: the
// resolved configuration and every tensor whole (unsharded), fp32, under Megatron's parameter
// names. Loaders and savers for each format meet here, so N formats need N of each, not N².
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/layout_shard_writers.hpp"
#include "model/gpt_config.hpp"

namespace mgt {

struct ModelWeights {
  GptConfig config;                                   // resolved
  std::map<std::string, std::vector<float>> tensors;  // every parameter of config, row-major
  std::string tokenizer_json = "{}";                  // the tokenizer description, when known
  // The source checkpoint's full arguments (mgt loader). A saver of mgt checkpoints keeps them
  // when non-empty and writes model_args_json(config) otherwise; anything that changes the
  // configuration clears them.
  std::string args_json;
  std::int64_t iteration = 0;
  std::string source;  // what was loaded, for messages: "checkpoint DIR", "GPT-2 model DIR"
  // config.json's model_type when read from a Hugging Face directory ("gpt2", "llama",
  // "mistral", "mixtral"), or from the record of one that an mgt checkpoint keeps (hf_architecture_record.hpp):
  // what a Hugging Face saver writes unless told otherwise. Empty for other mgt checkpoints.
  std::string hf_model_type;
  // Mistral's and Mixtral's sliding_window (nullopt: null), with hf_model_type "mistral" or "mixtral".
  std::optional<std::int64_t> hf_sliding_window;

  std::int64_t num_parameters() const;  // Σ elements over tensors
  // The tensor or mgt::Error naming it.
  const std::vector<float>& at(const std::string& name) const;
};

// Reads an mgt checkpoint of any layout (a save directory or an iteration directory).
ModelWeights read_mgt_model_weights(const std::string& load_dir);

// Writes a weights-only mgt checkpoint of weights.iteration into save_dir at `layout` (one file
// per tensor and pipeline rank), which must not exist or be empty (a conversion never adds to,
// or moves the tracker of, an existing run); a caller other than a single-threaded tool holds
// save_dir's lock (FreshOutputDirectory). Returns the iteration directory written.
std::string write_mgt_model_weights(const ModelWeights& weights, const std::string& save_dir,
                                    const ckpt::TargetLayout& layout = {});

// Throws mgt::Error unless `dir` is absent or an empty directory (a lone writer lock file counts
// as empty).
void require_fresh_output_directory(const std::string& dir);

}  // namespace mgt
