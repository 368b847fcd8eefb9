// A Hugging Face LlamaForCausalLM, MistralForCausalLM or MixtralForCausalLM directory: config.json and the weights
// (model.safetensors, or shards with model.safetensors.index.json) as save_pretrained writes
// them, read into and written from ModelWeights.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "ckpt/hf_directory_files.hpp"
#include "ckpt/model_weights.hpp"

namespace mgt {

// Reads DIR (F32, F16, BF16 or F64 tensors, widened to fp32). Names may carry
// LlamaForCausalLM's "model." prefix or not (LlamaModel); a stored lm_head.weight of a model with
// tied embeddings must equal the word embedding, and the rotary inv_freq buffers old checkpoints
// carry are skipped. The config's bos_token_id and eos_token_id are kept in the tokenizer record
// ("bos", "eod") so that an export writes them back. Throws mgt::Error naming the file and
// tensor or field at fault. seq_length defaults to max_position_embeddings.
ModelWeights read_hf_llama_directory(const std::string& dir, const HfReadOptions& options = {});

// The model configuration of DIR/config.json alone, as read_hf_llama_directory derives it.
GptConfig read_hf_llama_model_config(const std::string& dir, const HfReadOptions& options = {});

// Writes DIR (must not exist or be empty) as `model_type` ("llama", "mistral" or "mixtral"). The tokenizer
// record's "bos" and "eod" become bos_token_id and eos_token_id (null when unknown). Throws
// mgt::Error when the model is not Llama-expressible.
void write_hf_llama_directory(const ModelWeights& weights, const std::string& dir, const std::string& model_type,
                              const HfExportOptions& options = {});

}  // namespace mgt
