// The Hugging Face architecture an mgt checkpoint was imported from, kept in its metadata
// (/meta/extra "hf_architecture") so that exporting it again writes that architecture, not the
// one its shape suggests: a Mistral model comes back as MistralForCausalLM, with the fields of
// MistralConfig that mgt's GptConfig does not hold (sliding_window); likewise Mixtral.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace mgt {

inline constexpr const char* kHfArchitectureKey = "hf_architecture";

struct HfArchitectureRecord {
  std::string model_type;  // config.json's model_type: "gpt2", "llama", "mistral", "mixtral"
  // Mistral's (and Mixtral's) sliding_window: nullopt for null (no window); otherwise one that covers every
  // position (the only kind mgt reads), kept so that the export says the same.
  std::optional<std::int64_t> sliding_window;
};

// {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": null} on
// one line (sliding_window for Mistral and Mixtral only).
std::string hf_architecture_record_json(const HfArchitectureRecord& record);

// Throws mgt::Error naming `where` when the text is not such a record or names an architecture
// mgt does not write.
HfArchitectureRecord parse_hf_architecture_record(const std::string& json, const std::string& where);

// config.json's architectures entry for a model_type: "GPT2LMHeadModel", "LlamaForCausalLM",
// "MistralForCausalLM", "MixtralForCausalLM".
std::string hf_architecture_name(const std::string& model_type);

}  // namespace mgt
