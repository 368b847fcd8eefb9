// Hugging Face Llama and Mistral interchange: the q/k/v and gate/up splits on known values,
// transformers' logits reproduced by mgt's forward on imported models (golden files from
// tools/reference/llama_hf_reference.py), sharded and bf16/fp16 exports, round trips bit for bit,
// and refusals that name the field, tensor or property at fault.
#include <catch2/catch.hpp>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../model/model_testing.hpp"
#include "ckpt/convert_job.hpp"
#include "ckpt/hf_llama_config.hpp"
#include "ckpt/hf_llama_directory.hpp"
#include "ckpt/hf_llama_layout.hpp"
#include "ckpt/hf_model_directory.hpp"
#include "ckpt/model_checkpoint.hpp"
#include "ckpt/model_weights.hpp"
#include "ckpt/safetensors_model_files.hpp"
#include "ckpt/safetensors_reader.hpp"
#include "ckpt/safetensors_writer.hpp"
#include "core/error.hpp"
#include "kernels/backend_factory.hpp"
#include "kernels/operation_params.hpp"
#include "hf_testing.hpp"
#include "test_paths.hpp"

using namespace mgt;
using namespace mgt::hf_testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// llama_like_config with rotary over the whole head, as Llama has it.
GptConfig llama_config() {
  GptConfig c = model_testing::llama_like_config();
  c.rotary_percent = 1.0;
  c.rotary_base = 500000.0;
  c.max_position_embeddings = 16;
  return c;
}

std::unique_ptr<GptModel> save_random_model(const GptConfig& config, Backend& backend, const std::string& dir,
                                            const std::string& tokenizer_json = "{}") {
  return hf_testing::save_random_model(config, backend, dir, 11, tokenizer_json);
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

struct GoldenLogits {
  std::vector<std::int64_t> tokens;
  std::int64_t vocab = 0;
  std::vector<float> logits;    // [tokens, vocab]
  std::vector<double> inv_freq;  // the scaled model's rotary inverse frequencies
};

GoldenLogits golden_logits(const std::string& model) {
  simdjson::dom::parser parser;
  const simdjson::padded_string text = simdjson::padded_string::load(golden_path("hf_llama_logits.json"));
  const simdjson::dom::element root = parser.parse(text);
  GoldenLogits g;
  const simdjson::dom::element entry = root[model];
  simdjson::dom::array tokens;
  if (entry["tokens"].get(tokens)) tokens = root["tokens"].get_array();  // the shared ones
  for (std::int64_t t : tokens) g.tokens.push_back(t);
  simdjson::dom::array inv_freq;
  if (!entry["inv_freq"].get(inv_freq))
    for (double f : inv_freq) g.inv_freq.push_back(f);
  g.vocab = entry["shape"].at(1).get_int64();
  for (double v : entry["logits"].get_array()) g.logits.push_back(static_cast<float>(v));
  return g;
}

// The config.json of the golden Llama model with `key` set to `json_value` (or removed when
// json_value is empty), in a fresh directory beside a copy of its weights.
std::string edited_llama(const std::string& dir, const std::string& key, const std::string& json_value) {
  std::string config = file_bytes(golden_path("hf-llama-tiny/config.json"));
  const std::string quoted = "\"" + key + "\": ";
  const std::size_t at = config.find(quoted);
  if (at != std::string::npos) {
    const std::size_t end = config.find_first_of(",\n", config.find_first_not_of(' ', at + quoted.size()) + 1);
    const std::size_t value_end = config[end] == ',' ? end + 1 : end;
    config.erase(at, value_end - at);
  }
  if (!json_value.empty()) config.insert(config.find('{') + 1, "\n  " + quoted + json_value + ",");
  const std::string out = dir + "/" + key + (json_value.empty() ? "-absent" : "");
  fs::create_directories(out);
  write_text(out + "/config.json", config);
  fs::copy_file(golden_path("hf-llama-tiny/model.safetensors"), out + "/model.safetensors");
  return out;
}

}  // namespace

TEST_CASE("Llama layout: q/k/v split per query group and gate/up halves", "[ckpt][hf][llama]") {
  GptConfig c = llama_config();
  c.hidden_size = 2;
  c.kv_channels = 1;  // head_dim 1: Megatron rows q0 q1 k0 v0 q2 q3 k1 v1 (4 heads, 2 groups)
  c.ffn_hidden_size = 2;
  c.rotary_percent = 1.0;
  c.max_position_embeddings = 4;
  c.seq_length = 4;
  // head_dim 1 cannot rotate; the table only needs the shapes.
  c.position_embedding_type = PositionEmbeddingType::kNone;
  const auto mappings = hf_llama_tensor_mappings(c);
  const auto& qkv = mapping_named(mappings, "decoder.layers.1.self_attention.linear_qkv.weight");
  REQUIRE(qkv.parts.size() == 3);
  CHECK(qkv.parts[0].hf_name == "model.layers.1.self_attn.q_proj.weight");
  CHECK(qkv.parts[1].hf_name == "model.layers.1.self_attn.k_proj.weight");
  CHECK(qkv.parts[2].hf_name == "model.layers.1.self_attn.v_proj.weight");
  CHECK(qkv.parts[0].hf_shape == std::vector<std::int64_t>{4, 2});
  CHECK(qkv.parts[1].hf_shape == std::vector<std::int64_t>{2, 2});
  // Megatron element [row r, input i] = 10r + i.
  std::vector<float> megatron;
  for (int r = 0; r < 8; ++r)
    for (int i = 0; i < 2; ++i) megatron.push_back(static_cast<float>(10 * r + i));
  const auto parts = to_hf_parts(qkv, megatron);
  CHECK(parts[0] == std::vector<float>{0, 1, 10, 11, 40, 41, 50, 51});  // q0 q1 | q2 q3
  CHECK(parts[1] == std::vector<float>{20, 21, 60, 61});                // k0 | k1
  CHECK(parts[2] == std::vector<float>{30, 31, 70, 71});                // v0 | v1
  CHECK(from_hf_parts(qkv, parts) == megatron);

  const auto& fc1 = mapping_named(mappings, "decoder.layers.0.mlp.linear_fc1.weight");
  REQUIRE(fc1.parts.size() == 2);
  CHECK(fc1.parts[0].hf_name == "model.layers.0.mlp.gate_proj.weight");
  CHECK(fc1.parts[1].hf_name == "model.layers.0.mlp.up_proj.weight");
  const auto halves = to_hf_parts(fc1, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(halves[0] == std::vector<float>{1, 2, 3, 4});
  CHECK(halves[1] == std::vector<float>{5, 6, 7, 8});

  auto single = [&](const std::string& name) { return mapping_named(mappings, name).parts.at(0).hf_name; };
  CHECK(single("embedding.word_embeddings.weight") == "model.embed_tokens.weight");
  CHECK(single("decoder.layers.0.input_layernorm.weight") == "model.layers.0.input_layernorm.weight");
  CHECK(single("decoder.layers.0.pre_mlp_layernorm.weight") == "model.layers.0.post_attention_layernorm.weight");
  CHECK(single("decoder.layers.0.self_attention.linear_proj.weight") == "model.layers.0.self_attn.o_proj.weight");
  CHECK(single("decoder.layers.0.mlp.linear_fc2.weight") == "model.layers.0.mlp.down_proj.weight");
  CHECK(single("decoder.final_layernorm.weight") == "model.norm.weight");
  CHECK(single("output_layer.weight") == "lm_head.weight");

  // save_pretrained's order, which decides the shards.
  CHECK(hf_llama_state_dict_position("model.embed_tokens.weight") <
        hf_llama_state_dict_position("model.layers.0.self_attn.q_proj.weight"));
  CHECK(hf_llama_state_dict_position("model.layers.0.mlp.down_proj.weight") <
        hf_llama_state_dict_position("model.layers.0.input_layernorm.weight"));
  CHECK(hf_llama_state_dict_position("model.layers.1.self_attn.q_proj.weight") <
        hf_llama_state_dict_position("model.layers.10.self_attn.q_proj.weight"));
  CHECK(hf_llama_state_dict_position("model.norm.weight") < hf_llama_state_dict_position("lm_head.weight"));
}

TEST_CASE("Imported Llama and Mistral models give transformers' logits", "[ckpt][hf][llama]") {
  for (const std::string model : {"hf-llama-tiny", "hf-mistral-tiny"}) {
    INFO(model);
    const GoldenLogits golden = golden_logits(model);
    const std::string dir = test::scratch_dir("hf_llama_golden_" + model);
    ConvertOptions import = convert("hf", "mgt", golden_path(model), dir + "/mgt");
    import.make_vocab_size_divisible_by = 128;  // Megatron's padding: 300 → 384 rows
    const ConvertResult r = convert_checkpoint(import);
    CHECK(r.vocabulary.source_rows == 300);
    CHECK(r.vocabulary.destination_rows == 384);
    const auto backend_owner = make_backend("cpu");
    Backend& backend = *backend_owner;
    const ModelCheckpoint checkpoint = open_model_checkpoint(dir + "/mgt");
    CHECK(checkpoint.config.position_embedding_type == PositionEmbeddingType::kRope);
    CHECK(checkpoint.config.group_query_attention);
    CHECK(checkpoint.config.num_query_groups == 2);
    CHECK(checkpoint.config.untie_embeddings_and_output_weights == (model == "hf-mistral-tiny"));
    CHECK(checkpoint.config.kv_channels == (model == "hf-mistral-tiny" ? 16 : 8));
    auto mgt_model = load_checkpoint_model(checkpoint, backend);
    const std::vector<float> logits = logits_of(*mgt_model, golden.tokens);
    check_golden_logits(logits, golden.logits, static_cast<std::int64_t>(golden.tokens.size()), golden.vocab, 384);
    // The padding rows are zero, so their logits are too.
    CHECK(logits[static_cast<std::size_t>(383)] == 0.0f);
  }
}

TEST_CASE("A Llama 3.1 model with rope scaling gives transformers' logits and exports back", "[ckpt][hf][llama]") {
  const GoldenLogits golden = golden_logits("hf-llama31-tiny");
  // The scaling rule against transformers' own inverse frequencies (rope_type llama3).
  REQUIRE(golden.inv_freq.size() == 16);
  for (std::size_t i = 0; i < golden.inv_freq.size(); ++i) {
    INFO("frequency " << i);
    const double plain = std::pow(500000.0, -2.0 * static_cast<double>(i) / 32.0);
    CHECK(llama3_scaled_inv_freq(plain, 8.0) == Approx(golden.inv_freq[i]).epsilon(1e-6));
  }
  const std::string dir = test::scratch_dir("hf_llama31");
  convert_checkpoint(convert("hf", "mgt", golden_path("hf-llama31-tiny"), dir + "/mgt"));
  const ModelCheckpoint checkpoint = open_model_checkpoint(dir + "/mgt");
  CHECK(checkpoint.config.use_rope_scaling);
  CHECK(checkpoint.config.rope_scaling_factor == 8.0);
  CHECK(checkpoint.config.query_groups() == 1);
  CHECK_THAT(checkpoint.metadata.args_json,
             Contains("\"use_rope_scaling\": true") && Contains("\"rope_scaling_factor\": 8.0"));
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  auto model = load_checkpoint_model(checkpoint, backend);
  const std::vector<float> logits = logits_of(*model, golden.tokens);
  REQUIRE(logits.size() == golden.logits.size());
  const auto rows = static_cast<std::int64_t>(golden.tokens.size());
  check_golden_logits(logits, golden.logits, rows, golden.vocab, golden.vocab);
  // Back to Hugging Face: the same weights, and Llama 3.1's rope_scaling in config.json, which
  // reads back as the same model.
  convert_checkpoint(convert("mgt", "hf", dir + "/mgt", dir + "/hf"));
  CHECK(file_bytes(dir + "/hf/model.safetensors") == file_bytes(golden_path("hf-llama31-tiny/model.safetensors")));
  CHECK_THAT(file_bytes(dir + "/hf/config.json"),
             Contains(R"("rope_scaling": {)") && Contains(R"("factor": 8.0)") &&
                 Contains(R"("high_freq_factor": 4.0)") && Contains(R"("low_freq_factor": 1.0)") &&
                 Contains(R"("original_max_position_embeddings": 8192)") && Contains(R"("rope_type": "llama3")"));
  const HfLlamaConfig back = parse_hf_llama_config_json(file_bytes(dir + "/hf/config.json"), "config.json");
  REQUIRE(back.llama3_rope_factor.has_value());
  CHECK(*back.llama3_rope_factor == 8.0);
  // Mistral has no such field here: the export is refused rather than silently unscaled.
  ConvertOptions mistral = convert("mgt", "hf", dir + "/mgt", dir + "/mistral");
  mistral.hf_model_type = "mistral";
  CHECK_THROWS_WITH(convert_checkpoint(mistral), Contains("--use-rope-scaling"));
}

TEST_CASE("Hugging Face Llama and Mistral to mgt and back is byte for byte", "[ckpt][hf][llama]") {
  const std::string dir = test::scratch_dir("hf_llama_hf_round_trip");
  // Single file, tied embeddings.
  convert_checkpoint(convert("hf", "mgt", golden_path("hf-llama-tiny"), dir + "/llama-mgt"));
  const ModelWeights imported = read_mgt_model_weights(dir + "/llama-mgt");
  CHECK(imported.tokenizer_json.find("\"eod\": 2") != std::string::npos);
  convert_checkpoint(convert("mgt", "hf", dir + "/llama-mgt", dir + "/llama-hf"));
  CHECK(file_bytes(dir + "/llama-hf/model.safetensors") ==
        file_bytes(golden_path("hf-llama-tiny/model.safetensors")));
  const std::string config = file_bytes(dir + "/llama-hf/config.json");
  CHECK_THAT(config, Contains("\"LlamaForCausalLM\"") && Contains("\"model_type\": \"llama\"") &&
                         Contains("\"tie_word_embeddings\": true") && Contains("\"rope_theta\": 500000.0") &&
                         Contains("\"bos_token_id\": 1") && Contains("\"eos_token_id\": 2") &&
                         Contains("\"num_key_value_heads\": 2") && Contains("\"head_dim\": 8"));

  // Sharded Mistral: the same shards as save_pretrained's for the same shard size. The mgt
  // checkpoint records the architecture, so the export is Mistral again without being told.
  convert_checkpoint(convert("hf", "mgt", golden_path("hf-mistral-tiny"), dir + "/mistral-mgt"));
  CHECK(open_model_checkpoint(dir + "/mistral-mgt").metadata.extra_json.at("hf_architecture") ==
        R"({"architectures": ["MistralForCausalLM"], "model_type": "mistral", "sliding_window": null})");
  ConvertOptions out = convert("mgt", "hf", dir + "/mistral-mgt", dir + "/mistral-hf");
  out.max_shard_bytes = 80'000;
  convert_checkpoint(out);
  for (const char* shard : {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                            "model-00003-of-00003.safetensors"}) {
    INFO(shard);
    CHECK(file_bytes(dir + "/mistral-hf/" + shard) == file_bytes(golden_path("hf-mistral-tiny/") + shard));
  }
  CHECK_THAT(file_bytes(dir + "/mistral-hf/model.safetensors.index.json"),
             Contains("\"model.layers.0.mlp.up_proj.weight\": \"model-00002-of-00003.safetensors\""));
  CHECK_THAT(file_bytes(dir + "/mistral-hf/config.json"),
             Contains("\"MistralForCausalLM\"") && Contains("\"model_type\": \"mistral\"") &&
                 Contains("\"sliding_window\": null") && Contains("\"tie_word_embeddings\": false") &&
                 Contains("\"head_dim\": 16"));
  // Resharded, it keeps the record; --hf-model-type still chooses.
  ConvertOptions reshard = convert("mgt", "mgt", dir + "/mistral-mgt", dir + "/mistral-tp2");
  reshard.target_tensor_parallel_size = 2;
  convert_checkpoint(reshard);
  convert_checkpoint(convert("mgt", "hf", dir + "/mistral-tp2", dir + "/mistral-hf3"));
  CHECK_THAT(file_bytes(dir + "/mistral-hf3/config.json"), Contains("\"MistralForCausalLM\""));
  ConvertOptions as_llama = convert("mgt", "hf", dir + "/mistral-mgt", dir + "/as-llama");
  as_llama.hf_model_type = "llama";
  convert_checkpoint(as_llama);
  CHECK_THAT(file_bytes(dir + "/as-llama/config.json"),
             Contains("\"LlamaForCausalLM\"") && !Contains("sliding_window"));
  // A window that covers every position comes back as it was.
  const std::string windowed = dir + "/mistral-window";
  fs::copy(golden_path("hf-mistral-tiny"), windowed);
  {
    const std::string config = file_bytes(windowed + "/config.json");
    const std::string null_window = "\"sliding_window\": null";
    const auto at = config.find(null_window);
    REQUIRE(at != std::string::npos);
    std::ofstream(windowed + "/config.json")
        << config.substr(0, at) << "\"sliding_window\": 64" << config.substr(at + null_window.size());
  }
  convert_checkpoint(convert("hf", "mgt", windowed, dir + "/window-mgt"));
  convert_checkpoint(convert("mgt", "hf", dir + "/window-mgt", dir + "/window-hf"));
  CHECK_THAT(file_bytes(dir + "/window-hf/config.json"),
             Contains("\"MistralForCausalLM\"") && Contains("\"sliding_window\": 64"));
  // hf → hf keeps the architecture it read; the default shard size keeps this model in one file.
  convert_checkpoint(convert("hf", "hf", golden_path("hf-mistral-tiny"), dir + "/mistral-hf2"));
  CHECK(fs::exists(dir + "/mistral-hf2/model.safetensors"));
  CHECK_THAT(file_bytes(dir + "/mistral-hf2/config.json"), Contains("\"model_type\": \"mistral\""));
  CHECK(read_hf_model_directory(dir + "/mistral-hf2").tensors == read_hf_model_directory(dir + "/mistral-hf").tensors);
}

TEST_CASE("mgt Llama-shaped models to Hugging Face and back are bit-exact", "[ckpt][hf][llama]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptConfig tied = llama_config();
  tied.untie_embeddings_and_output_weights = false;
  tied.group_query_attention = false;  // every head its own key and value
  GptConfig biased = llama_config();
  biased.add_bias_linear = true;  // attention_bias and mlp_bias
  for (const GptConfig& config : {llama_config(), tied, biased}) {
    const std::string dir = test::scratch_dir("hf_llama_mgt_round_trip");
    auto original = save_random_model(config, backend, dir + "/mgt", R"({"eod": 7, "bos": 5})");
    const ConvertResult exported = convert_checkpoint(convert("mgt", "hf", dir + "/mgt", dir + "/hf"));
    CHECK(exported.parameters == config.num_parameters());
    const std::string text = file_bytes(dir + "/hf/config.json");
    CHECK_THAT(text, Contains("\"bos_token_id\": 5") && Contains("\"eos_token_id\": 7"));
    CHECK_THAT(text, Contains(config.add_bias_linear ? "\"attention_bias\": true" : "\"attention_bias\": false"));

    // Llama has no residual dropout to carry; everything else comes back.
    GptConfig expected = config;
    expected.hidden_dropout = 0.0;
    check_reimport(*original, expected, dir + "/hf", dir + "/back", backend);
  }
}

TEST_CASE("Llama exports in bf16 and fp16, sharded, read back as the rounded weights", "[ckpt][hf][llama]") {
  const std::string dir = test::scratch_dir("hf_llama_dtypes");
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  auto original = save_random_model(llama_config(), backend, dir + "/mgt");
  const ModelWeights weights = read_mgt_model_weights(dir + "/mgt");
  for (auto [dtype, torch_name] : {std::pair{ckpt::SafetensorsDType::kBF16, "bfloat16"},
                                   std::pair{ckpt::SafetensorsDType::kF16, "float16"}}) {
    INFO(torch_name);
    const std::string out = dir + "/" + torch_name;
    ConvertOptions o = convert("mgt", "hf", dir + "/mgt", out);
    o.hf_dtype = dtype;
    o.max_shard_bytes = 1000;  // several shards; embed_tokens and q_proj (1024 bytes each) get one each
    convert_checkpoint(o);
    CHECK_THAT(file_bytes(out + "/config.json"), Contains(std::string("\"torch_dtype\": \"") + torch_name + "\""));
    CHECK(fs::exists(out + "/model.safetensors.index.json"));
    CHECK_FALSE(fs::exists(out + "/model.safetensors"));
    const ckpt::SafetensorsModelFiles files(out);
    const auto* embed = files.find("model.embed_tokens.weight");
    REQUIRE(embed != nullptr);
    CHECK(embed->dtype == dtype);
    const ModelWeights back = read_hf_model_directory(out);
    for (const auto& [name, values] : weights.tensors) {
      INFO(name);
      const std::vector<float> rounded =
          ckpt::safetensors_to_float32(dtype, ckpt::float32_to_safetensors(dtype, values));
      CHECK(bit_identical(back.at(name), rounded));
    }
  }
}

TEST_CASE("Llama config.json: transformers 4 and 5 layouts and refusals naming the field", "[ckpt][hf][llama]") {
  // transformers 4 writes rope_theta and rope_scaling at the top level.
  const std::string v4 = R"({"model_type": "llama", "vocab_size": 300, "hidden_size": 32, "intermediate_size": 88,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "rope_theta": 500000.0,
      "rope_scaling": null, "rms_norm_eps": 1e-05, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
      "max_position_embeddings": 64, "bos_token_id": 128000, "eos_token_id": 128001})";
  const HfLlamaConfig hf = parse_hf_llama_config_json(v4, "c.json");
  CHECK(hf.rope_theta == 500000.0);
  CHECK(hf.head_dim == 8);
  CHECK(hf.torch_dtype == "bfloat16");
  const GptConfig c = gpt_config_of(hf, 64, 300);
  CHECK(c.rotary_base == 500000.0);
  CHECK(c.norm_epsilon == 1e-5);
  CHECK(c.query_groups() == 2);
  CHECK_FALSE(c.untie_embeddings_and_output_weights);
  const HfLlamaConfig back = parse_hf_llama_config_json(
      hf_llama_config_json(hf_llama_config_of(c, "llama", 300, 1, 2, "float32")), "c.json");
  CHECK(model_args_json(gpt_config_of(back, 64, 300)) == model_args_json(c));
  CHECK(back.bos_token_id == 1);
  CHECK(back.eos_token_id == 2);
  // Ids outside the vocabulary (Llama 3's 128000 in this model) are written as null.
  CHECK_THAT(hf_llama_config_json(hf_llama_config_of(c, "llama", 300, 128000, std::nullopt, "float32")),
             Contains("\"bos_token_id\": null") && Contains("\"eos_token_id\": null"));

  auto refused = [&](const std::string& text) {
    try {
      parse_hf_llama_config_json(text, "c.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  auto with = [&](const std::string& extra) { return "{" + extra + "," + v4.substr(1); };
  // Llama 3.1's scaling is read, in either layout; the factor is its only free parameter.
  const HfLlamaConfig scaled = parse_hf_llama_config_json(
      with(R"("rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, )"
           R"("high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"), "c.json");
  CHECK(scaled.llama3_rope_factor == 32.0);
  CHECK(gpt_config_of(scaled, 64, 300).use_rope_scaling);
  CHECK(gpt_config_of(scaled, 64, 300).rope_scaling_factor == 32.0);
  CHECK(refused(with(R"("rope_scaling": {"type": "default"})")) == "accepted");
  CHECK_THAT(refused(with(R"("rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 2.0})")),
             Contains("c.json") && Contains("rope_scaling's low_freq_factor is 2.0, not 1.0"));
  CHECK_THAT(refused(with(R"("rope_scaling": {"rope_type": "llama3", "factor": 0})")),
             Contains("rope_scaling's factor must be a positive number"));
  CHECK_THAT(refused(with(R"("rope_scaling": {"rope_type": "linear", "factor": 2.0})")),
             Contains("rope_scaling of type 'linear' is not supported") && Contains("llama3"));
  CHECK_THAT(refused(with(R"("rope_parameters": {"rope_type": "yarn", "rope_theta": 1.0})")),
             Contains("rope_parameters of type 'yarn' is not supported"));
  CHECK_THAT(refused(with(R"("hidden_act": "gelu")")), Contains("hidden_act 'gelu'"));
  CHECK_THAT(refused(with(R"("attention_bias": true)")), Contains("attention_bias is true but mlp_bias is false"));
  CHECK_THAT(refused(with(R"("num_key_value_heads": 3)")), Contains("not divisible by num_key_value_heads"));
  CHECK_THAT(refused(with(R"("hidden_size": "32")")), Contains("'hidden_size' is not an integer"));
  CHECK_THAT(refused(with(R"("rms_norm_eps": -1)")), Contains("rms_norm_eps must be a positive number"));
  CHECK_THAT(refused(with(R"("partial_rotary_factor": 0.5)")), Contains("partial_rotary_factor"));
  CHECK_THAT(refused(R"({"model_type": "llama", "vocab_size": 300})"), Contains("c.json") && Contains("hidden_size"));
  std::string mistral = with(R"("sliding_window": 16)");
  mistral.replace(mistral.find("\"llama\""), 7, "\"mistral\"");
  CHECK_THAT(refused(mistral), Contains("sliding_window 16 is shorter than max_position_embeddings (64)"));
  mistral = with(R"("sliding_window": 64)");
  mistral.replace(mistral.find("\"llama\""), 7, "\"mistral\"");
  CHECK(refused(mistral) == "accepted");  // a window over every position is no window
}

TEST_CASE("Llama import refuses broken directories, naming the file and tensor", "[ckpt][hf][llama]") {
  const std::string dir = test::scratch_dir("hf_llama_refusals");
  CHECK_THAT(refusal(edited_llama(dir, "rope_scaling", R"({"rope_type": "yarn", "factor": 8.0})")),
             Contains("config.json") && Contains("rope_scaling of type 'yarn'"));
  CHECK_THAT(refusal(edited_llama(dir, "num_hidden_layers", "")), Contains("config.json") &&
                                                                      Contains("'num_hidden_layers'"));
  CHECK_THAT(refusal(edited_llama(dir, "model_type", "\"qwen2\"")),
             Contains("model_type is 'qwen2'") && Contains("gpt2, llama, mistral"));
  // One more layer than the weights have: the first missing tensor is named.
  CHECK_THAT(refusal(edited_llama(dir, "num_hidden_layers", "3")),
             Contains("model.safetensors") && Contains("'model.layers.2.input_layernorm.weight'"));
  CHECK_THAT(refusal(edited_llama(dir, "head_dim", "4")),
             Contains("'model.layers.0.self_attn.q_proj.weight' has shape [32, 32]") && Contains("[16, 32]"));
  // Untied: lm_head.weight is now required.
  CHECK_THAT(refusal(edited_llama(dir, "tie_word_embeddings", "false")), Contains("'lm_head.weight'"));

  // A shard the index names is missing; a tensor is listed in the wrong shard.
  const std::string sharded = dir + "/sharded";
  fs::copy(golden_path("hf-mistral-tiny"), sharded);
  fs::remove(sharded + "/model-00003-of-00003.safetensors");
  CHECK_THAT(refusal(sharded), Contains("model.safetensors.index.json") &&
                                   Contains("model-00003-of-00003.safetensors, which does not exist"));
  fs::copy_file(golden_path("hf-mistral-tiny/model-00003-of-00003.safetensors"),
                sharded + "/model-00003-of-00003.safetensors");
  std::string index = file_bytes(sharded + "/model.safetensors.index.json");
  const std::string entry = R"("model.norm.weight": "model-00003-of-00003.safetensors")";
  index.replace(index.find(entry), entry.size(), R"("model.norm.weight": "model-00001-of-00003.safetensors")");
  write_text(sharded + "/model.safetensors.index.json", index);
  CHECK_THAT(refusal(sharded), Contains("'model.norm.weight' is listed in model-00001-of-00003.safetensors"));
  write_text(sharded + "/model.safetensors.index.json", R"({"weight_map": {"a": "../model.safetensors"}})");
  CHECK_THAT(refusal(sharded), Contains("not a file in the model directory"));

  // Exports refuse what Llama cannot express, before writing anything.
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptConfig partial = llama_config();
  partial.rotary_percent = 0.5;
  save_random_model(partial, backend, dir + "/partial");
  CHECK_THROWS_WITH(convert_checkpoint(convert("mgt", "hf", dir + "/partial", dir + "/x")),
                    Contains("cannot be expressed as Llama: --rotary-percent 0.5"));
  save_random_model(model_testing::gpt2_like_config(), backend, dir + "/gpt2");
  ConvertOptions as_llama = convert("mgt", "hf", dir + "/gpt2", dir + "/x");
  as_llama.hf_model_type = "llama";
  CHECK_THROWS_WITH(convert_checkpoint(as_llama), Contains("--position-embedding-type learned_absolute"));
  GptConfig biased = llama_config();
  biased.add_bias_linear = true;
  save_random_model(biased, backend, dir + "/biased");
  ConvertOptions as_mistral = convert("mgt", "hf", dir + "/biased", dir + "/x");
  as_mistral.hf_model_type = "mistral";
  CHECK_THROWS_WITH(convert_checkpoint(as_mistral), Contains("cannot be expressed as Mistral: biases"));
  CHECK_FALSE(fs::exists(dir + "/x"));
}
