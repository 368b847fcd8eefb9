#include "ckpt/hf_architecture_record.hpp"

#include "ckpt/hf_llama_config.hpp"
#include "ckpt/hf_model_directory.hpp"
#include "core/error.hpp"
#include "core/json_scalars.hpp"
#include "core/json_text.hpp"

namespace mgt {

std::string hf_architecture_name(const std::string& model_type) {
  if (model_type == kHfGpt2ModelType) return "GPT2LMHeadModel";
  return hf_llama_family_name(model_type) + "ForCausalLM";
}

std::string hf_architecture_record_json(const HfArchitectureRecord& record) {
  // One line, like the other metadata records.
  std::string json = "{\"architectures\": [" + json_quote(hf_architecture_name(record.model_type)) +
                     "], \"model_type\": " + json_quote(record.model_type);
  if (hf_has_mistral_fields(record.model_type))
    json += ", \"sliding_window\": " + (record.sliding_window ? std::to_string(*record.sliding_window) : "null");
  return json + "}";
}

HfArchitectureRecord parse_hf_architecture_record(const std::string& json, const std::string& where) {
  const JsonScalars j(json, where);
  HfArchitectureRecord record;
  record.model_type = j.text("model_type");
  if (record.model_type != kHfGpt2ModelType && record.model_type != kHfLlamaModelType &&
      record.model_type != kHfMistralModelType && record.model_type != kHfMixtralModelType &&
      record.model_type != kHfQwen2MoeModelType && record.model_type != kHfQwen3ModelType &&
      record.model_type != kHfQwen3MoeModelType)
    throw Error(where + ": model_type '" + record.model_type +
                "' is not gpt2, llama, mistral, mixtral, qwen2_moe, qwen3 or qwen3_moe");
  if (j.contains("sliding_window") && j.show("sliding_window") != "null") {
    record.sliding_window = j.integer("sliding_window");
    if (*record.sliding_window < 1)
      throw Error(where + ": sliding_window must be positive (got " + std::to_string(*record.sliding_window) + ")");
  }
  return record;
}

}  // namespace mgt
