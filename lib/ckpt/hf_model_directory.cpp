#include "ckpt/hf_model_directory.hpp"

#include <algorithm>
#include <cmath>

#include "ckpt/hf_gpt2_config.hpp"
#include "ckpt/hf_gpt2_directory.hpp"
#include "ckpt/hf_llama_config.hpp"
#include "ckpt/hf_llama_directory.hpp"
#include "core/error.hpp"

namespace mgt {

namespace {

std::string known_types_text() {
  std::string s;
  for (const std::string& t : hf_model_types()) s += (s.empty() ? "" : ", ") + t;
  return s;
}

// config.json's model_type, checked to be one mgt reads.
std::string model_type_in(const std::string& dir) {
  const std::string path = dir + "/" + kHfConfigFile;
  const std::string type = hf_model_type_of(read_hf_config_text(dir), path);
  if (type.empty()) throw Error("config " + path + " has no 'model_type' (expected one of " + known_types_text() + ")");
  const auto& known = hf_model_types();
  if (std::find(known.begin(), known.end(), type) == known.end())
    throw Error("config " + path + ": model_type is '" + type + "'; mgt-ckpt-convert reads " + known_types_text());
  return type;
}

}  // namespace

const std::vector<std::string>& hf_model_types() {
  static const std::vector<std::string> types = {kHfGpt2ModelType, kHfLlamaModelType, kHfMistralModelType,
                                                  kHfMixtralModelType, kHfQwen2MoeModelType, kHfQwen3ModelType,
                                                  kHfQwen3MoeModelType};
  return types;
}

ModelWeights read_hf_model_directory(const std::string& dir, const HfReadOptions& options) {
  ModelWeights weights =
      model_type_in(dir) == kHfGpt2ModelType ? read_hf_gpt2_directory(dir, options) : read_hf_llama_directory(dir, options);
  // Imported weights that are not finite would make every logit NaN; the model's own readers
  // refuse such a checkpoint, and the import refuses to make one.
  for (const auto& [name, values] : weights.tensors)
    if (!std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); }))
      throw Error(weights.source + ": tensor '" + name + "' holds NaN or infinite values");
  return weights;
}

GptConfig read_hf_model_config(const std::string& dir, const HfReadOptions& options) {
  if (model_type_in(dir) == kHfGpt2ModelType) return read_hf_gpt2_model_config(dir, options);
  return read_hf_llama_model_config(dir, options);
}

std::string hf_model_type_for(const ModelWeights& weights, const std::string& requested) {
  const auto& known = hf_model_types();
  if (!requested.empty()) {
    if (std::find(known.begin(), known.end(), requested) == known.end())
      throw UsageError("--hf-model-type '" + requested + "' is not one of " + known_types_text());
    return requested;
  }
  if (!weights.hf_model_type.empty()) return weights.hf_model_type;
  // Query and key norms are Qwen3's; a mixture of experts with a gated shared expert is
  // Qwen2-MoE's, one without Mixtral's.
  if (weights.config.qk_layernorm) return weights.config.moe.enabled() ? kHfQwen3MoeModelType : kHfQwen3ModelType;
  if (weights.config.moe.enabled())
    return weights.config.moe.shared_expert_gate ? kHfQwen2MoeModelType : kHfMixtralModelType;
  return weights.config.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute ? kHfGpt2ModelType
                                                                                            : kHfLlamaModelType;
}

void require_hf_expressible(const ModelWeights& weights, const std::string& requested_model_type) {
  auto require_as = [&](const std::string& type) {
    if (type == kHfGpt2ModelType) require_gpt2_expressible(weights.config, weights.source);
    else require_llama_expressible(weights.config, type, weights.source);
  };
  const std::string type = hf_model_type_for(weights, requested_model_type);
  try {
    require_as(type);
  } catch (const Error& chosen) {
    // Chosen from the model: say why the other architecture does not fit either (a mixture of
    // experts has Mixtral alone).
    if (!requested_model_type.empty() || !weights.hf_model_type.empty() || type == kHfMixtralModelType ||
        type == kHfQwen2MoeModelType || type == kHfQwen3ModelType || type == kHfQwen3MoeModelType)
      throw;
    try {
      require_as(type == kHfGpt2ModelType ? kHfLlamaModelType : kHfGpt2ModelType);
    } catch (const Error& other) {
      const std::string prefix = weights.source + " cannot be expressed as ";
      const std::string why = other.what();
      throw Error(std::string(chosen.what()) + "; nor as " +
                  (why.rfind(prefix, 0) == 0 ? why.substr(prefix.size()) : why));
    }
    throw;
  }
}

void write_hf_model_directory(const ModelWeights& weights, const std::string& dir,
                              const std::string& requested_model_type, const HfExportOptions& options) {
  const std::string type = hf_model_type_for(weights, requested_model_type);
  if (type == kHfGpt2ModelType) {
    const std::int64_t eod = eod_of_tokenizer_json(weights.tokenizer_json, "the tokenizer of " + weights.source);
    write_hf_gpt2_directory(weights, dir, eod, options);
  } else {
    write_hf_llama_directory(weights, dir, type, options);
  }
}

}  // namespace mgt
