#include "ckpt/hf_gpt2_directory.hpp"

#include <set>

#include "ckpt/hf_gpt2_config.hpp"
#include "ckpt/hf_gpt2_layout.hpp"
#include "ckpt/safetensors_model_files.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_scalars.hpp"

namespace mgt {

namespace {

std::string read_text_file(const std::string& path) { return read_input_file(path, "GPT-2 config"); }

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Causal-mask buffers (attn.bias, attn.masked_bias) that transformers saved before making them
// non-persistent: constants, not weights.
bool is_attention_mask_buffer(const std::string& name) {
  return name.find(".attn.") != std::string::npos &&
         (ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias"));
}

}  // namespace

std::int64_t eod_of_tokenizer_json(const std::string& tokenizer_json, const std::string& what) {
  const JsonScalars t(tokenizer_json, what);
  if (t.contains("eod") && t.show("eod") != "null") return t.integer("eod");
  return kGpt2EndOfText;
}

GptConfig read_hf_gpt2_model_config(const std::string& dir, const HfGpt2ReadOptions& options) {
  require_hf_model_files(dir, "GPT-2 model " + dir);
  const std::string config_path = dir + "/" + kHfConfigFile;
  const HfGpt2Config hf = parse_hf_gpt2_config_json(read_text_file(config_path), config_path);
  const std::int64_t seq_length = options.seq_length.value_or(hf.n_positions);
  if (seq_length < 1 || seq_length > hf.n_positions)
    throw UsageError("--seq-length " + std::to_string(seq_length) + " must be between 1 and n_positions (" +
                     std::to_string(hf.n_positions) + ") of " + config_path);
  return gpt_config_of(hf, seq_length, hf.vocab_size);
}

ModelWeights read_hf_gpt2_directory(const std::string& dir, const HfGpt2ReadOptions& options) {
  ModelWeights w;
  w.config = read_hf_gpt2_model_config(dir, options);
  const std::string config_path = dir + "/" + kHfConfigFile;
  w.source = "GPT-2 model " + dir;
  w.hf_model_type = "gpt2";
  const ckpt::SafetensorsModelFiles file(dir);
  const std::string& weights_path = file.description();

  std::set<std::string> used;
  auto lookup = [&](const std::string& name) -> const ckpt::SafetensorsTensorInfo* {
    if (const auto* t = file.find(name)) return t;
    const std::string prefix = kHfGpt2Prefix;
    if (name.rfind(prefix, 0) == 0) return file.find(name.substr(prefix.size()));
    return nullptr;
  };
  for (const HfGpt2TensorMapping& m : hf_gpt2_tensor_mappings(w.config)) {
    const ckpt::SafetensorsTensorInfo* t = lookup(m.hf_name);
    if (t == nullptr) throw Error("safetensors file " + weights_path + " has no tensor '" + m.hf_name + "'");
    if (t->shape != m.hf_shape)
      throw Error("safetensors file " + file.file_of(*t) + ": tensor '" + t->name + "' has shape " + shape_text(t->shape) +
                  ", " + config_path + " implies " + shape_text(m.hf_shape));
    w.tensors[m.megatron_name] = from_hf_layout(m, file.read_float32(*t));
    used.insert(t->name);
  }
  for (const std::string& name : file.tensor_names()) {
    if (used.count(name) || is_attention_mask_buffer(name)) continue;
    if (name == "lm_head.weight") {
      if (file.read_float32(*file.find(name)) != w.at("embedding.word_embeddings.weight"))
        throw Error("safetensors file " + weights_path + ": lm_head.weight differs from the word embedding; mgt reads "
                    "GPT-2 with its output layer tied to the word embedding");
      continue;
    }
    throw Error("safetensors file " + weights_path + ": tensor '" + name + "' is not a parameter of GPT-2");
  }
  return w;
}

void write_hf_gpt2_directory(const ModelWeights& weights, const std::string& dir, std::int64_t eod,
                             const HfExportOptions& options) {
  require_gpt2_expressible(weights.config, weights.source);
  std::vector<HfExportTensor> tensors;
  for (const HfGpt2TensorMapping& m : hf_gpt2_tensor_mappings(weights.config))
    tensors.push_back({m.hf_name, m.hf_shape, to_hf_layout(m, weights.at(m.megatron_name))});
  HfGpt2Config hf = hf_gpt2_config_of(weights.config, weights.config.padded_vocab_size, eod);
  hf.torch_dtype = hf_torch_dtype_name(options.dtype);
  write_hf_export_directory(dir, hf_gpt2_config_json(hf), tensors, options);
}

}  // namespace mgt
