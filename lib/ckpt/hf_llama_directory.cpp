#include "ckpt/hf_llama_directory.hpp"

#include <algorithm>
#include <set>

#include "ckpt/hf_llama_config.hpp"
#include "ckpt/hf_llama_layout.hpp"
#include "ckpt/safetensors_model_files.hpp"
#include "core/error.hpp"
#include "core/json_scalars.hpp"
#include "data/python_json.hpp"

namespace mgt {

namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string family_of(const HfLlamaConfig& hf) { return hf_llama_family_name(hf.model_type); }

// The rotary inverse frequencies transformers saved as a buffer before making it non-persistent:
// derived from rope_theta, not weights.
bool is_rotary_buffer(const std::string& name) { return ends_with(name, ".rotary_emb.inv_freq"); }

// transformers 5 can save Mixtral's and Qwen2-MoE's experts fused
// (save_pretrained(save_original_format=False): mlp.experts.gate_up_proj [E, 2f, h]), which is not
// the layout their checkpoints are shared in.
std::string fused_experts_hint(const ckpt::SafetensorsModelFiles& files, const std::string& missing) {
  if (missing.find(".block_sparse_moe.") == std::string::npos && missing.find(".mlp.experts.") == std::string::npos)
    return "";
  for (const std::string& name : files.tensor_names())
    if (ends_with(name, ".mlp.experts.gate_up_proj"))
      return " (they hold transformers 5's fused experts, '" + name +
             "'; save the model with save_pretrained's default save_original_format=True)";
  return "";
}

struct LlamaModelConfig {
  HfLlamaConfig hf;
  GptConfig config;
  std::string path;  // of config.json
};

LlamaModelConfig read_llama_config(const std::string& dir, const HfReadOptions& options) {
  LlamaModelConfig c;
  c.path = dir + "/" + kHfConfigFile;
  c.hf = parse_hf_llama_config_json(read_hf_config_text(dir), c.path);
  require_hf_model_files(dir, family_of(c.hf) + " model " + dir);
  const std::int64_t seq_length = options.seq_length.value_or(c.hf.max_position_embeddings);
  if (seq_length < 1 || seq_length > c.hf.max_position_embeddings)
    throw UsageError("--seq-length " + std::to_string(seq_length) + " must be between 1 and max_position_embeddings (" +
                     std::to_string(c.hf.max_position_embeddings) + ") of " + c.path);
  c.config = gpt_config_of(c.hf, seq_length, c.hf.vocab_size);
  return c;
}

// The token ids config.json names, kept where an mgt checkpoint records its tokenizer.
std::string token_record(const HfLlamaConfig& hf) {
  PyValue t = PyValue::dict();
  if (hf.bos_token_id) t.set("bos", PyValue::integer(*hf.bos_token_id));
  if (hf.eos_token_id) t.set("eod", PyValue::integer(*hf.eos_token_id));
  return t.dumps();
}

std::optional<std::int64_t> recorded_token(const JsonScalars& tokenizer, const char* key) {
  if (!tokenizer.contains(key) || tokenizer.show(key) == "null") return std::nullopt;
  return tokenizer.integer(key);
}

}  // namespace

GptConfig read_hf_llama_model_config(const std::string& dir, const HfReadOptions& options) {
  return read_llama_config(dir, options).config;
}

ModelWeights read_hf_llama_directory(const std::string& dir, const HfReadOptions& options) {
  const LlamaModelConfig c = read_llama_config(dir, options);
  ModelWeights w;
  w.config = c.config;
  w.source = family_of(c.hf) + " model " + dir;
  w.hf_model_type = c.hf.model_type;
  w.hf_sliding_window = c.hf.sliding_window;
  w.tokenizer_json = token_record(c.hf);
  const ckpt::SafetensorsModelFiles files(dir);

  // LlamaModel's own save has no "model." prefix; LlamaForCausalLM's has it.
  auto lookup = [&](const std::string& name) -> const ckpt::SafetensorsTensorInfo* {
    if (const auto* t = files.find(name)) return t;
    const std::string prefix = kHfLlamaPrefix;
    if (name.rfind(prefix, 0) == 0) return files.find(name.substr(prefix.size()));
    return nullptr;
  };
  std::set<std::string> used;
  for (const HfLlamaTensorMapping& m : hf_llama_tensor_mappings(w.config, c.hf.model_type)) {
    std::vector<std::vector<float>> parts;
    for (const HfLlamaPart& part : m.parts) {
      const ckpt::SafetensorsTensorInfo* t = lookup(part.hf_name);
      if (t == nullptr)
        throw Error("safetensors files " + files.description() + " have no tensor '" + part.hf_name + "'" +
                    fused_experts_hint(files, part.hf_name));
      if (t->shape != part.hf_shape)
        throw Error("safetensors file " + files.file_of(*t) + ": tensor '" + t->name + "' has shape " +
                    shape_text(t->shape) + ", " + c.path + " implies " + shape_text(part.hf_shape));
      parts.push_back(files.read_float32(*t));
      used.insert(t->name);
    }
    w.tensors[m.megatron_name] = from_hf_parts(m, parts);
  }
  for (const std::string& name : files.tensor_names()) {
    if (used.count(name) || is_rotary_buffer(name)) continue;
    const ckpt::SafetensorsTensorInfo& t = *files.find(name);
    if (name == "lm_head.weight" && !w.config.untie_embeddings_and_output_weights) {
      // transformers ties it to the embedding when tie_word_embeddings is true, whatever is stored.
      if (files.read_float32(t) != w.at("embedding.word_embeddings.weight"))
        throw Error("safetensors file " + files.file_of(t) + ": lm_head.weight differs from the word embedding, but " +
                    c.path + " has tie_word_embeddings true");
      continue;
    }
    throw Error("safetensors file " + files.file_of(t) + ": tensor '" + name + "' is not a parameter of " +
                family_of(c.hf) + " as " + c.path + " describes it");
  }
  return w;
}

void write_hf_llama_directory(const ModelWeights& weights, const std::string& dir, const std::string& model_type,
                              const HfExportOptions& options) {
  require_llama_expressible(weights.config, model_type, weights.source);
  std::vector<HfExportTensor> tensors;
  for (const HfLlamaTensorMapping& m : hf_llama_tensor_mappings(weights.config, model_type)) {
    std::vector<std::vector<float>> parts = to_hf_parts(m, weights.at(m.megatron_name));
    for (std::size_t i = 0; i < parts.size(); ++i)
      tensors.push_back({m.parts[i].hf_name, m.parts[i].hf_shape, std::move(parts[i])});
  }
  // save_pretrained shards in state_dict order.
  std::stable_sort(tensors.begin(), tensors.end(), [](const HfExportTensor& a, const HfExportTensor& b) {
    return hf_llama_state_dict_position(a.name) < hf_llama_state_dict_position(b.name);
  });
  const JsonScalars tokenizer(weights.tokenizer_json, "the tokenizer of " + weights.source);
  HfLlamaConfig hf =
      hf_llama_config_of(weights.config, model_type, weights.config.padded_vocab_size, recorded_token(tokenizer, "bos"),
                         recorded_token(tokenizer, "eod"), hf_torch_dtype_name(options.dtype));
  // A Mistral (or Mixtral) model's window comes back as it was read (it covers every position the
  // model takes).
  if (hf_has_mistral_fields(model_type) && weights.hf_model_type == model_type)
    hf.sliding_window = weights.hf_sliding_window;
  write_hf_export_directory(dir, hf_llama_config_json(hf), tensors, options);
}

}  // namespace mgt
