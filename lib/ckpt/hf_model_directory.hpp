// Hugging Face model directories of every architecture mgt-ckpt-convert knows, chosen by
// config.json's model_type when reading and by the model (or the caller) when writing:
// "gpt2" (GPT2LMHeadModel, hf_gpt2_directory.hpp), "llama" (LlamaForCausalLM), "mistral"
// (MistralForCausalLM) and "mixtral" (MixtralForCausalLM, all three hf_llama_directory.hpp).
#pragma once
#include <string>
#include <vector>

#include "ckpt/hf_directory_files.hpp"
#include "ckpt/model_weights.hpp"

namespace mgt {

inline constexpr const char* kHfGpt2ModelType = "gpt2";

// "gpt2", "llama", "mistral", "mixtral".
const std::vector<std::string>& hf_model_types();

// Throws mgt::Error naming DIR/config.json when its model_type is absent or not one of the above.
ModelWeights read_hf_model_directory(const std::string& dir, const HfReadOptions& options = {});
GptConfig read_hf_model_config(const std::string& dir, const HfReadOptions& options = {});

// The model_type a saver writes: `requested` when not empty; else the one the weights were read
// as; else mixtral for a mixture of experts, gpt2 when GPT-2 can express the model (learned
// absolute positions), llama otherwise.
// Throws mgt::UsageError for a requested type not among hf_model_types().
std::string hf_model_type_for(const ModelWeights& weights, const std::string& requested);

// Throws mgt::Error naming the first property of the model that hf_model_type_for's
// architecture cannot express (and, when that architecture was chosen from the model, why the
// other one does not fit either); what write_hf_model_directory checks before writing.
void require_hf_expressible(const ModelWeights& weights, const std::string& requested_model_type);

// Writes DIR as hf_model_type_for(weights, requested_model_type). Throws mgt::Error when that
// architecture cannot express the model, naming the property.
void write_hf_model_directory(const ModelWeights& weights, const std::string& dir,
                              const std::string& requested_model_type, const HfExportOptions& options);

}  // namespace mgt
