#include "ckpt/hf_architecture_record.hpp"

#include "ckpt/hf_llama_config.hpp"
#include "ckpt/hf_model_directory.hpp"
#include "core/error.hpp"
#include "core/json_scalars.hpp"
#include "data/python_json.hpp"

namespace mgt {

std::string hf_architecture_name(const std::string& model_type) {
  if (model_type == kHfGpt2ModelType) return "GPT2LMHeadModel";
  if (model_type == kHfMistralModelType) return "MistralForCausalLM";
  return "LlamaForCausalLM";
}

std::string hf_architecture_record_json(const HfArchitectureRecord& record) {
  PyValue j = PyValue::dict();
  j.set("architectures", PyValue::list({PyValue::string(hf_architecture_name(record.model_type))}));
  j.set("model_type", PyValue::string(record.model_type));
  if (record.model_type == kHfMistralModelType)
    j.set("sliding_window", record.sliding_window ? PyValue::integer(*record.sliding_window) : PyValue::none());
  return j.dumps();
}

HfArchitectureRecord parse_hf_architecture_record(const std::string& json, const std::string& where) {
  const JsonScalars j(json, where);
  HfArchitectureRecord record;
  record.model_type = j.text("model_type");
  if (record.model_type != kHfGpt2ModelType && record.model_type != kHfLlamaModelType &&
      record.model_type != kHfMistralModelType)
    throw Error(where + ": model_type '" + record.model_type + "' is not gpt2, llama or mistral");
  if (j.contains("sliding_window") && j.show("sliding_window") != "null") {
    record.sliding_window = j.integer("sliding_window");
    if (*record.sliding_window < 1)
      throw Error(where + ": sliding_window must be positive (got " + std::to_string(*record.sliding_window) + ")");
  }
  return record;
}

}  // namespace mgt
