#include "ckpt/hf_gpt2_directory.hpp"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "ckpt/hf_gpt2_config.hpp"
#include "ckpt/hf_gpt2_layout.hpp"
#include "ckpt/safetensors_reader.hpp"
#include "ckpt/safetensors_writer.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/temporary_file.hpp"
#include "train/checkpoint_json.hpp"

namespace mgt {

namespace fs = std::filesystem;

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

void require_safetensors_present(const std::string& dir, const std::string& weights_path) {
  if (fs::exists(weights_path)) return;
  if (fs::exists(dir + "/model.safetensors.index.json"))
    throw Error("GPT-2 model " + dir + " is split into several safetensors files (model.safetensors.index.json); "
                "mgt-ckpt-convert reads one model.safetensors");
  if (fs::exists(dir + "/pytorch_model.bin"))
    throw Error("GPT-2 model " + dir + " has pytorch_model.bin but no model.safetensors; mgt does not read pickled "
                "PyTorch files (they can run code): save it with save_pretrained(dir, safe_serialization=True)");
  throw Error("GPT-2 model " + dir + " has no " + kHfWeightsFile);
}

}  // namespace

std::int64_t eod_of_tokenizer_json(const std::string& tokenizer_json, const std::string& what) {
  const JsonScalars t(tokenizer_json, what);
  if (t.contains("eod") && t.show("eod") != "null") return t.integer("eod");
  return kGpt2EndOfText;
}

GptConfig read_hf_gpt2_model_config(const std::string& dir, const HfGpt2ReadOptions& options) {
  if (!fs::is_directory(dir)) throw Error("--load-dir " + dir + ": no such directory");
  const std::string config_path = dir + "/" + kHfConfigFile;
  if (!fs::exists(config_path)) throw Error("GPT-2 model " + dir + " has no " + kHfConfigFile);
  require_safetensors_present(dir, dir + "/" + kHfWeightsFile);
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
  const std::string weights_path = dir + "/" + kHfWeightsFile;
  w.source = "GPT-2 model " + dir;
  const ckpt::SafetensorsReader file(weights_path);

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
      throw Error("safetensors file " + weights_path + ": tensor '" + t->name + "' has shape " + shape_text(t->shape) +
                  ", " + config_path + " implies " + shape_text(m.hf_shape));
    w.tensors[m.megatron_name] = from_hf_layout(m, file.read_float32(*t));
    used.insert(t->name);
  }
  for (const ckpt::SafetensorsTensorInfo& t : file.tensors()) {
    if (used.count(t.name) || is_attention_mask_buffer(t.name)) continue;
    if (t.name == "lm_head.weight") {
      if (file.read_float32(t) != w.at("embedding.word_embeddings.weight"))
        throw Error("safetensors file " + weights_path + ": lm_head.weight differs from the word embedding; mgt reads "
                    "GPT-2 with its output layer tied to the word embedding");
      continue;
    }
    throw Error("safetensors file " + weights_path + ": tensor '" + t.name + "' is not a parameter of GPT-2");
  }
  return w;
}

void write_hf_gpt2_directory(const ModelWeights& weights, const std::string& dir, std::int64_t eod) {
  require_gpt2_expressible(weights.config, weights.source);
  require_fresh_output_directory(dir);
  const fs::path final_dir = fs::absolute(fs::path(dir).lexically_normal());
  if (final_dir.has_parent_path()) fs::create_directories(final_dir.parent_path());
  // An unpredictable name, created exclusively: nothing planted beside DIR is written through.
  const fs::path staging = create_temporary_directory(final_dir.string());
  try {
    std::vector<std::vector<float>> converted;
    std::vector<ckpt::SafetensorsTensor> tensors;
    const auto mappings = hf_gpt2_tensor_mappings(weights.config);
    converted.reserve(mappings.size());
    for (const HfGpt2TensorMapping& m : mappings) {
      converted.push_back(to_hf_layout(m, weights.at(m.megatron_name)));
      tensors.push_back(ckpt::SafetensorsTensor::float32(m.hf_name, m.hf_shape, converted.back()));
    }
    // transformers refuses safetensors files whose metadata does not name a framework.
    ckpt::write_safetensors((staging / kHfWeightsFile).string(), std::move(tensors), {{"format", "pt"}});
    const HfGpt2Config hf = hf_gpt2_config_of(weights.config, weights.config.padded_vocab_size, eod);
    write_file_atomically((staging / kHfConfigFile).string(), hf_gpt2_config_json(hf));
    sync_directory(staging.string());
    // rename(2) replaces an empty directory in one step.
    if (std::rename(staging.c_str(), final_dir.c_str()) != 0)
      throw Error(system_error_message("cannot rename the finished export into place", final_dir.string()));
    sync_directory(final_dir.parent_path().string());
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    throw;
  }
}

}  // namespace mgt
