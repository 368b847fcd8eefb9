// Shared by the Hugging Face interchange tests (GPT-2, Llama, Mixtral, Qwen2-MoE, Qwen3): the
// golden files' paths, conversions between directories, randomised mgt checkpoints, logits of a
// token sequence, byte and bit comparisons, the golden generations, re-imports of an export, and
// edited copies of a golden config.json.
#pragma once
#include <catch2/catch.hpp>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "../model/model_testing.hpp"
#include "ckpt/convert_job.hpp"
#include "ckpt/hf_model_directory.hpp"
#include "ckpt/model_checkpoint.hpp"
#include "core/error.hpp"
#include "kernels/backend_factory.hpp"
#include "model/kv_cache.hpp"
#include "test_paths.hpp"

namespace mgt::hf_testing {

inline std::string golden_path(const std::string& name) {
  return std::string(MGT_SOURCE_DIR) + "/tests/ckpt/golden/" + name;
}

inline ConvertOptions convert(const std::string& loader, const std::string& saver, const std::string& from,
                              const std::string& to) {
  ConvertOptions o;
  o.loader = loader;
  o.saver = saver;
  o.load_dir = from;
  o.save_dir = to;
  return o;
}

// A model of `config` with parameters drawn from `seed`, saved as iteration `iteration` in DIR.
inline std::unique_ptr<GptModel> save_random_model(const GptConfig& config, Backend& backend, const std::string& dir,
                                                   std::uint64_t seed, const std::string& tokenizer_json = "{}",
                                                   std::int64_t iteration = 3) {
  auto model = std::make_unique<GptModel>(config, backend);
  model_testing::randomize_parameters(model->parameters(), seed);
  save_model_checkpoint(dir, iteration, model->parameters(), model_args_json(config), tokenizer_json);
  return model;
}

inline std::vector<float> logits_of(GptModel& model, const std::vector<std::int64_t>& tokens) {
  MicroBatch batch;
  batch.batch_size = 1;
  batch.seq_length = static_cast<std::int64_t>(tokens.size());
  batch.tokens = tokens;
  return model.forward_only(batch, true).logits;
}

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The entry of a layout's tensor mappings for one mgt tensor name.
template <typename Mapping>
const Mapping& mapping_named(const std::vector<Mapping>& all, const std::string& name) {
  for (const auto& m : all)
    if (m.megatron_name == name) return m;
  FAIL("no mapping for " << name);
  return all.front();
}

// transformers' logits over `tokens` and its greedy completion of `prompt`, as the MoE models'
// reference scripts (tools/reference/*_hf_reference.py) write them.
// mgt's logits [rows, padded_vocab] against transformers' [rows, vocab] (the first vocab columns
// of each row): within 1e-5 of the largest |logit|, which is above 1.
inline void check_golden_logits(const std::vector<float>& logits, const std::vector<float>& golden,
                                std::int64_t rows, std::int64_t vocab, std::int64_t padded_vocab) {
  REQUIRE(static_cast<std::int64_t>(logits.size()) == rows * padded_vocab);
  float largest = 0.0f, worst = 0.0f;
  for (std::int64_t t = 0; t < rows; ++t)
    for (std::int64_t v = 0; v < vocab; ++v) {
      const float expected = golden[static_cast<std::size_t>(t * vocab + v)];
      largest = std::max(largest, std::fabs(expected));
      worst = std::max(worst, std::fabs(logits[static_cast<std::size_t>(t * padded_vocab + v)] - expected));
    }
  INFO("largest |logit| " << largest << ", largest difference " << worst);
  CHECK(largest > 1.0f);
  CHECK(worst <= 1e-5f * largest);
}

struct GoldenGeneration {
  std::vector<std::int64_t> tokens, prompt, greedy;
  std::int64_t vocab = 0;
  std::vector<float> logits;  // [tokens, vocab]
};

inline GoldenGeneration golden_generation(const std::string& file) {
  simdjson::dom::parser parser;
  const simdjson::padded_string text = simdjson::padded_string::load(golden_path(file));
  const simdjson::dom::element root = parser.parse(text);
  GoldenGeneration g;
  for (std::int64_t t : root["tokens"].get_array()) g.tokens.push_back(t);
  for (std::int64_t t : root["prompt"].get_array()) g.prompt.push_back(t);
  for (std::int64_t t : root["greedy"].get_array()) g.greedy.push_back(t);
  g.vocab = root["shape"].at(1).get_int64();
  for (double v : root["logits"].get_array()) g.logits.push_back(static_cast<float>(v));
  return g;
}

// MODEL (imported from the golden directory) against transformers: its logits over the golden
// tokens within 1e-5 of the largest, and its greedy tokens over the key/value cache, as
// mgt-generate runs it (the prompt in one step, then a token at a time; transformers recomputed
// the whole sequence for each of its tokens).
inline void check_golden_generation(GptModel& model, Backend& backend, const GoldenGeneration& golden) {
  const std::vector<float> logits = logits_of(model, golden.tokens);
  REQUIRE(logits.size() == golden.logits.size());
  check_golden_logits(logits, golden.logits, static_cast<std::int64_t>(golden.tokens.size()), golden.vocab,
                      golden.vocab);

  KvCache cache(backend, model.config(), 1, static_cast<std::int64_t>(golden.prompt.size() + golden.greedy.size()));
  std::vector<std::int64_t> picked =
      model.forward_cached_greedy(golden.prompt, static_cast<std::int64_t>(golden.prompt.size()), cache, golden.vocab);
  std::vector<std::int64_t> continuation = picked;
  while (continuation.size() < golden.greedy.size()) {
    picked = model.forward_cached_greedy(picked, 1, cache, golden.vocab);
    continuation.push_back(picked.at(0));
  }
  CHECK(continuation == golden.greedy);
}

// check_golden_generation of the model `checkpoint` holds, loaded on the CPU.
inline void check_golden_generation(const ModelCheckpoint& checkpoint, const GoldenGeneration& golden) {
  const auto backend = make_backend("cpu");
  auto model = load_checkpoint_model(checkpoint, *backend);
  check_golden_generation(*model, *backend, golden);
}

// The golden Hugging Face directory `golden` imported into the fresh scratch directory `scratch`
// (as its mgt/), and opened.
inline ModelCheckpoint import_golden(const std::string& golden, const std::string& scratch) {
  const std::string dir = test::scratch_dir(scratch);
  convert_checkpoint(convert("hf", "mgt", golden_path(golden), dir + "/mgt"));
  return open_model_checkpoint(dir + "/mgt");
}

// The Hugging Face directory HF, exported from `original`'s checkpoint, imported into BACK at
// the original's sequence length: it describes `expected`, and holds the original's parameters
// and gives its logits bit for bit.
inline void check_reimport(GptModel& original, const GptConfig& expected, const std::string& hf,
                           const std::string& back, Backend& backend) {
  ConvertOptions import = convert("hf", "mgt", hf, back);
  import.seq_length = expected.seq_length;
  convert_checkpoint(import);
  const ModelCheckpoint checkpoint = open_model_checkpoint(back);
  CHECK(model_args_json(checkpoint.config) == model_args_json(expected));
  auto reloaded = load_checkpoint_model(checkpoint, backend);
  for (const ParameterEntry& e : original.parameters().entries()) {
    INFO(e.name);
    CHECK(bit_identical(original.parameters().read_param(e), reloaded->parameters().read_param(e)));
  }
  const std::vector<std::int64_t> tokens = {3, 1, 4, 1, 5, 9, 2, 6};
  CHECK(bit_identical(logits_of(original, tokens), logits_of(*reloaded, tokens)));
}

// A copy of the golden model directory `golden` (config.json and model.safetensors) in a fresh
// directory under DIR, its config.json's `key` set to `json_value` (the value on the key's line,
// as save_pretrained indents it; a list whole).
inline std::string edited_golden(const std::string& dir, const std::string& golden, const std::string& key,
                                 const std::string& json_value) {
  std::string config = file_bytes(golden_path(golden + "/config.json"));
  const std::string quoted = "\"" + key + "\": ";
  const std::size_t at = config.find(quoted);
  REQUIRE(at != std::string::npos);
  std::size_t end = at + quoted.size();
  if (config[end] == '[') end = config.find(']', end) + 1;
  else end = config.find_first_of(",\n", end);
  config.replace(at + quoted.size(), end - at - quoted.size(), json_value);
  static int edits = 0;  // one directory per edit: a key may be edited twice
  const std::string out = dir + "/" + key + "-" + std::to_string(++edits);
  std::filesystem::create_directories(out);
  std::ofstream(out + "/config.json", std::ios::binary) << config;
  std::filesystem::copy_file(golden_path(golden + "/model.safetensors"), out + "/model.safetensors");
  return out;
}

// The message with which reading the Hugging Face directory DIR fails ("accepted" if it does not).
inline std::string refusal(const std::string& dir) {
  try {
    read_hf_model_directory(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

// The message with which exporting a random model of `config` to Hugging Face (as `type`, or the
// type the config implies) fails, having written nothing ("accepted" if it does not fail).
inline std::string export_refusal(const GptConfig& config, const std::string& dir, const std::string& type = "") {
  const auto backend_owner = make_backend("cpu");
  save_random_model(config, *backend_owner, dir + "/mgt", 21, R"({"eod": 2, "bos": 1})");
  ConvertOptions o = convert("mgt", "hf", dir + "/mgt", dir + "/hf");
  o.hf_model_type = type;
  try {
    convert_checkpoint(o);
  } catch (const Error& e) {
    CHECK_FALSE(std::filesystem::exists(dir + "/hf"));
    return e.what();
  }
  return "accepted";
}

}  // namespace mgt::hf_testing
