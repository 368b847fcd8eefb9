// A Hugging Face GPT-2 model directory: config.json and model.safetensors (or shards with
// model.safetensors.index.json) as GPT2LMHeadModel.save_pretrained writes them, read into and
// written from ModelWeights.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "ckpt/hf_directory_files.hpp"
#include "ckpt/model_weights.hpp"

namespace mgt {

inline constexpr const char* kHfWeightsFile = "model.safetensors";

// seq_length's default is n_positions.
using HfGpt2ReadOptions = HfReadOptions;

// Reads DIR/config.json and DIR/model.safetensors, or the shards DIR/model.safetensors.index.json
// names (F32, F16, BF16 or F64, widened to fp32).
// Tensor names may carry GPT2LMHeadModel's "transformer." prefix or not (GPT2Model); a stored
// lm_head.weight must equal the word embedding, and the attention-mask buffers old checkpoints
// carry are skipped. Throws mgt::Error naming the file and tensor at fault; pickled
// pytorch_model.bin files are refused, never read.
ModelWeights read_hf_gpt2_directory(const std::string& dir, const HfGpt2ReadOptions& options = {});

// The model configuration of DIR/config.json alone, as read_hf_gpt2_directory derives it: what a
// caller needs to estimate the memory before any tensor is read.
GptConfig read_hf_gpt2_model_config(const std::string& dir, const HfGpt2ReadOptions& options = {});

// Writes DIR with config.json and the weights (see write_hf_export_directory). DIR must not exist
// or be empty. `eod` becomes the bos/eos token id. Throws mgt::Error when the model is not
// GPT-2-expressible.
void write_hf_gpt2_directory(const ModelWeights& weights, const std::string& dir, std::int64_t eod,
                             const HfExportOptions& options = {});

// The end-of-document token a checkpoint's tokenizer description records, else GPT-2's 50256.
std::int64_t eod_of_tokenizer_json(const std::string& tokenizer_json, const std::string& what);

}  // namespace mgt
