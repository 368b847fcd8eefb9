// Hugging Face GPT-2 interchange: the QKV permutation and Conv1D transposition on known values,
// mgt → GPT-2 → mgt bit for bit (tensors and logits), vocabulary truncation, and refusals that
// name what GPT-2 cannot express.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "../model/model_testing.hpp"
#include "ckpt/convert_job.hpp"
#include "ckpt/hf_gpt2_config.hpp"
#include "ckpt/hf_gpt2_directory.hpp"
#include "ckpt/hf_gpt2_layout.hpp"
#include "ckpt/hf_model_directory.hpp"
#include "ckpt/model_checkpoint.hpp"
#include "ckpt/model_weights.hpp"
#include "ckpt/safetensors_reader.hpp"
#include "ckpt/safetensors_writer.hpp"
#include "ckpt/save_directory_lock.hpp"
#include "core/error.hpp"
#include "kernels/backend_factory.hpp"
#include "hf_testing.hpp"
#include "test_paths.hpp"

using namespace mgt;
using namespace mgt::hf_testing;
using Catch::Matchers::Contains;

namespace {

GptConfig tiny_gpt2_config() { return model_testing::gpt2_like_config(); }

// Saves a randomised tiny model as an mgt checkpoint in DIR and returns the model.
std::unique_ptr<GptModel> save_random_model(const GptConfig& config, Backend& backend, const std::string& dir,
                                            const std::string& tokenizer_json = "{}") {
  return hf_testing::save_random_model(config, backend, dir, 7, tokenizer_json, 5);
}

std::vector<float> logits_of(GptModel& model) {
  const model_testing::RefBatch batch = model_testing::random_batch(model.config(), 2, 8, 3);
  MicroBatch m = model_testing::micro_batch(batch);
  m.labels = {};
  m.loss_mask = {};
  return model.forward_only(m, true).logits;
}

}  // namespace

TEST_CASE("GPT-2 layout: fused QKV goes from per-head rows to query, key, value Conv1D columns", "[ckpt][hf]") {
  GptConfig c;
  c.num_layers = 1;
  c.hidden_size = 2;
  c.num_attention_heads = 2;  // head_dim 1: Megatron rows q0 k0 v0 q1 k1 v1
  c.seq_length = 4;
  c.padded_vocab_size = 8;
  const auto mappings = hf_gpt2_tensor_mappings(c);
  const auto& qkv = mapping_named(mappings, "decoder.layers.0.self_attention.linear_qkv.weight");
  CHECK(qkv.hf_name == "transformer.h.0.attn.c_attn.weight");
  CHECK(qkv.megatron_shape == std::vector<std::int64_t>{6, 2});
  CHECK(qkv.hf_shape == std::vector<std::int64_t>{2, 6});
  // Megatron element [row r, input c] = 10r + c.
  const std::vector<float> megatron = {0, 1, 10, 11, 20, 21, 30, 31, 40, 41, 50, 51};
  // GPT-2 [input c, column]: columns q0 q1 k0 k1 v0 v1 = Megatron rows 0 3 1 4 2 5.
  const std::vector<float> hf = {0, 30, 10, 40, 20, 50, 1, 31, 11, 41, 21, 51};
  CHECK(to_hf_layout(qkv, megatron) == hf);
  CHECK(from_hf_layout(qkv, hf) == megatron);

  const auto& bias = mapping_named(mappings, "decoder.layers.0.self_attention.linear_qkv.bias");
  CHECK(bias.hf_name == "transformer.h.0.attn.c_attn.bias");
  CHECK(to_hf_layout(bias, std::vector<float>{0, 1, 2, 3, 4, 5}) == std::vector<float>{0, 3, 1, 4, 2, 5});

  // Conv1D stores [in, out]: every other linear weight is transposed.
  const auto& proj = mapping_named(mappings, "decoder.layers.0.self_attention.linear_proj.weight");
  CHECK(proj.hf_name == "transformer.h.0.attn.c_proj.weight");
  CHECK(to_hf_layout(proj, std::vector<float>{1, 2, 3, 4}) == std::vector<float>{1, 3, 2, 4});
  const auto& fc1 = mapping_named(mappings, "decoder.layers.0.mlp.linear_fc1.weight");
  CHECK(fc1.hf_name == "transformer.h.0.mlp.c_fc.weight");
  CHECK(fc1.megatron_shape == std::vector<std::int64_t>{8, 2});
  CHECK(fc1.hf_shape == std::vector<std::int64_t>{2, 8});
  std::vector<float> w(16);
  for (int i = 0; i < 16; ++i) w[i] = static_cast<float>(i);
  const std::vector<float> t = to_hf_layout(fc1, w);
  CHECK(t[0 * 8 + 3] == w[3 * 2 + 0]);
  CHECK(t[1 * 8 + 5] == w[5 * 2 + 1]);
  CHECK(mapping_named(mappings, "decoder.layers.0.mlp.linear_fc2.weight").hf_name == "transformer.h.0.mlp.c_proj.weight");
  CHECK(mapping_named(mappings, "decoder.layers.0.input_layernorm.bias").hf_name == "transformer.h.0.ln_1.bias");
  CHECK(mapping_named(mappings, "decoder.layers.0.pre_mlp_layernorm.weight").hf_name == "transformer.h.0.ln_2.weight");
  CHECK(mapping_named(mappings, "embedding.word_embeddings.weight").hf_name == "transformer.wte.weight");
  CHECK(mapping_named(mappings, "embedding.position_embeddings.weight").hf_name == "transformer.wpe.weight");
  CHECK(mapping_named(mappings, "decoder.final_layernorm.weight").hf_name == "transformer.ln_f.weight");
  for (const auto& m : mappings) CHECK(m.hf_name != "lm_head.weight");
}

TEST_CASE("GPT-2 layout: the QKV permutation is inverted exactly for several heads", "[ckpt][hf]") {
  const auto mappings = hf_gpt2_tensor_mappings(tiny_gpt2_config());
  const auto& qkv = mapping_named(mappings, "decoder.layers.1.self_attention.linear_qkv.weight");
  const std::vector<float> values = kernel_testing::random_floats(48 * 16, 11);
  const std::vector<float> hf = to_hf_layout(qkv, values);
  CHECK(hf != values);
  CHECK(from_hf_layout(qkv, hf) == values);
  // Key channel 2 of head 3 (head_dim 4): Megatron row 3·12 + 4 + 2, GPT-2 column 16 + 3·4 + 2.
  CHECK(hf[5 * 48 + 16 + 14] == values[(36 + 4 + 2) * 16 + 5]);
}

TEST_CASE("GPT-2 config.json round trip and refusals", "[ckpt][hf]") {
  const GptConfig c = model_testing::openai_gelu_config();
  GptConfig tied = c;
  tied.untie_embeddings_and_output_weights = false;
  const HfGpt2Config hf = hf_gpt2_config_of(tied, 32, 50256);
  CHECK(hf.activation_function == "gelu_new");
  CHECK(hf_gpt2_config_of(tiny_gpt2_config(), 32, 0).activation_function == "gelu");
  const std::string text = hf_gpt2_config_json(hf);
  CHECK_THAT(text, Contains("\"GPT2LMHeadModel\"") && Contains("\"tie_word_embeddings\": true") &&
                       Contains("\"n_inner\": 64") && Contains("\"model_type\": \"gpt2\""));
  const HfGpt2Config back = parse_hf_gpt2_config_json(text, "config.json");
  CHECK(hf_gpt2_config_json(back) == text);
  CHECK(model_args_json(gpt_config_of(back, c.seq_length, 32)) == model_args_json(tied));
  // --squared-relu is transformers' relu2 (ReLUSquaredActivation), both ways.
  GptConfig squared = tied;
  squared.activation = Activation::kSquaredRelu;
  const HfGpt2Config relu2 = hf_gpt2_config_of(squared, 32, 50256);
  CHECK(relu2.activation_function == "relu2");
  const HfGpt2Config relu2_back = parse_hf_gpt2_config_json(hf_gpt2_config_json(relu2), "config.json");
  CHECK(gpt_config_of(relu2_back, c.seq_length, 32).activation == Activation::kSquaredRelu);

  CHECK_THROWS_WITH(parse_hf_gpt2_config_json(R"({"model_type": "llama"})", "c.json"), Contains("model_type is 'llama'"));
  CHECK_THROWS_WITH(parse_hf_gpt2_config_json(R"({"model_type": "gpt2", "tie_word_embeddings": false})", "c.json"),
                    Contains("tie_word_embeddings"));
  CHECK_THROWS_WITH(parse_hf_gpt2_config_json(R"({"model_type": "gpt2", "activation_function": "relu"})", "c.json"),
                    Contains("activation_function 'relu'"));
  CHECK_THROWS_WITH(
      parse_hf_gpt2_config_json(R"({"model_type": "gpt2", "scale_attn_by_inverse_layer_idx": true})", "c.json"),
      Contains("scale_attn_by_inverse_layer_idx"));
  // Absent keys take GPT2Config's defaults; n_inner null means 4·n_embd.
  const HfGpt2Config defaults = parse_hf_gpt2_config_json(R"({"model_type": "gpt2", "n_inner": null})", "c.json");
  CHECK(defaults.n_embd == 768);
  CHECK(gpt_config_of(defaults, 1024, 50257).ffn_hidden_size == 3072);
}

TEST_CASE("GPT-2 export refuses what GPT-2 cannot express, naming the property", "[ckpt][hf]") {
  const GptConfig base = tiny_gpt2_config();
  auto message = [](const GptConfig& c) {
    try {
      require_gpt2_expressible(c, "model M");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(message(base) == "accepted");
  GptConfig c = base;
  c.position_embedding_type = PositionEmbeddingType::kRope;
  CHECK_THAT(message(c), Contains("model M cannot be expressed as GPT-2") && Contains("--position-embedding-type rope"));
  c = base;
  c.normalization = Normalization::kRmsNorm;
  CHECK_THAT(message(c), Contains("--normalization RMSNorm"));
  c = base;
  c.activation = Activation::kSwiglu;
  c.ffn_hidden_size = 32;
  CHECK_THAT(message(c), Contains("--swiglu"));
  c = base;
  c.group_query_attention = true;
  c.num_query_groups = 2;
  CHECK_THAT(message(c), Contains("grouped-query attention"));
  c.num_query_groups = 4;  // one group per head is ordinary attention
  CHECK(message(c) == "accepted");
  c = base;
  c.untie_embeddings_and_output_weights = true;
  CHECK_THAT(message(c), Contains("--untie-embeddings-and-output-weights"));
  c = base;
  c.add_bias_linear = false;
  CHECK_THAT(message(c), Contains("--disable-bias-linear"));
  c = base;
  c.kv_channels = 8;
  CHECK_THAT(message(c), Contains("--kv-channels 8"));
  CHECK_THAT(message(model_testing::llama_like_config()), Contains("--position-embedding-type rope"));

  // Through the converter: nothing is written.
  const std::string dir = test::scratch_dir("hf_refuse_untied");
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  save_random_model(model_testing::openai_gelu_config(), backend, dir + "/mgt");
  CHECK_THROWS_WITH(convert_checkpoint(convert("mgt", "hf", dir + "/mgt", dir + "/hf")),
                    Contains("--untie-embeddings-and-output-weights"));
  CHECK_FALSE(std::filesystem::exists(dir + "/hf"));
}

TEST_CASE("mgt to GPT-2 to mgt is bit-exact in tensors, files and logits", "[ckpt][hf]") {
  const std::string dir = test::scratch_dir("hf_round_trip");
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  const GptConfig config = tiny_gpt2_config();
  auto original = save_random_model(config, backend, dir + "/mgt", R"({"eod": 7, "true_vocab_size": 30})");

  const ConvertResult exported = convert_checkpoint(convert("mgt", "hf", dir + "/mgt", dir + "/hf"));
  CHECK(exported.vocabulary.source_rows == 32);
  CHECK(exported.vocabulary.destination_rows == 32);
  CHECK(exported.parameters == config.num_parameters());
  CHECK(std::filesystem::exists(dir + "/hf/config.json"));
  CHECK_THAT(file_bytes(dir + "/hf/config.json"), Contains("\"eos_token_id\": 7") && Contains("\"vocab_size\": 32"));
  {
    const ckpt::SafetensorsReader st(dir + "/hf/model.safetensors");
    CHECK(st.find("lm_head.weight") == nullptr);
    CHECK(st.find("transformer.wte.weight")->shape == std::vector<std::int64_t>{32, 16});
    CHECK(st.find("transformer.h.1.attn.c_attn.weight")->shape == std::vector<std::int64_t>{16, 48});
    CHECK(st.tensors().size() == hf_gpt2_tensor_mappings(config).size());
  }

  // GPT-2 records no training sequence length: the import takes n_positions unless told.
  ConvertOptions import = convert("hf", "mgt", dir + "/hf", dir + "/back");
  import.seq_length = config.seq_length;
  const ConvertResult imported = convert_checkpoint(import);
  CHECK(imported.destination == dir + "/back/iter_0000000");
  const ModelCheckpoint back = open_model_checkpoint(dir + "/back");
  CHECK(model_args_json(back.config) == model_args_json(config));
  CHECK(read_hf_gpt2_directory(dir + "/hf").config.seq_length == config.max_position_embeddings);
  auto reloaded = load_checkpoint_model(back, backend);
  for (const ParameterEntry& e : original->parameters().entries()) {
    INFO(e.name);
    CHECK(bit_identical(original->parameters().read_param(e), reloaded->parameters().read_param(e)));
  }
  CHECK(bit_identical(logits_of(*original), logits_of(*reloaded)));

  convert_checkpoint(convert("hf", "hf", dir + "/hf", dir + "/hf2"));
  CHECK(file_bytes(dir + "/hf/model.safetensors") == file_bytes(dir + "/hf2/model.safetensors"));
  convert_checkpoint(convert("mgt", "hf", dir + "/back", dir + "/hf3"));
  CHECK(file_bytes(dir + "/hf/model.safetensors") == file_bytes(dir + "/hf3/model.safetensors"));

  // mgt → mgt is a weights-only copy that keeps the iteration and the arguments.
  const ConvertResult copied = convert_checkpoint(convert("mgt", "mgt", dir + "/mgt", dir + "/copy"));
  CHECK(copied.destination == dir + "/copy/iter_0000005");
  auto copy = load_checkpoint_model(open_model_checkpoint(dir + "/copy"), backend);
  CHECK(bit_identical(logits_of(*original), logits_of(*copy)));

  // Outputs are never written into a directory that holds something.
  CHECK_THROWS_WITH(convert_checkpoint(convert("mgt", "hf", dir + "/mgt", dir + "/hf")), Contains("is not empty"));
  CHECK_THROWS_WITH(convert_checkpoint(convert("hf", "mgt", dir + "/hf", dir + "/back")), Contains("is not empty"));
}

TEST_CASE("a conversion killed while writing leaves nothing in the way of its rerun", "[ckpt][hf]") {
  namespace fs = std::filesystem;
  const std::string dir = test::scratch_dir("hf_convert_killed");
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  const GptConfig config = tiny_gpt2_config();
  save_random_model(config, backend, dir + "/mgt");
  // What a SIGKILL leaves: the lock file of a process that is gone (the kernel dropped its
  // flock), the staging directory it was writing, a tracker temporary; beside a Hugging Face
  // export, its DIR.partial.* directory.
  auto leave_lock = [](const std::string& out) {
    fs::create_directories(out);
    std::ofstream(out + "/.mgt-writer.lock") << "host=elsewhere pid=999999\n";
  };
  for (const std::string& out : {dir + "/back", dir + "/copy"}) {
    leave_lock(out);
    fs::create_directories(out + "/.iter_0000005.tmp-0123456789abcdef");
    std::ofstream(out + "/.iter_0000005.tmp-0123456789abcdef/mp_rank_00.h5") << "half a shard";
    std::ofstream(out + "/latest_checkpointed_iteration.txt.tmp.AbCdEfGhIjKl") << "5";
  }
  leave_lock(dir + "/hf");
  fs::create_directories(dir + "/hf.partial.AbCdEfGhIjKl");
  std::ofstream(dir + "/hf.partial.AbCdEfGhIjKl/model.safetensors") << "half a file";
  fs::create_directories(dir + "/hf.partial.not-an-export");  // not a name an export uses: stays

  // While another process holds the lock, its staging directory is its own.
  {
    const ckpt::SaveDirectoryLock other(dir + "/hf");
    CHECK_THROWS_WITH(convert_checkpoint(convert("mgt", "hf", dir + "/mgt", dir + "/hf")),
                      Contains("is being written by another process"));
    CHECK(fs::exists(dir + "/hf.partial.AbCdEfGhIjKl/model.safetensors"));
  }
  convert_checkpoint(convert("mgt", "hf", dir + "/mgt", dir + "/hf"));
  CHECK_FALSE(fs::exists(dir + "/hf.partial.AbCdEfGhIjKl"));
  CHECK(fs::exists(dir + "/hf.partial.not-an-export"));
  CHECK(fs::exists(dir + "/hf/model.safetensors"));
  CHECK_FALSE(fs::exists(dir + "/hf/.mgt-writer.lock"));

  ConvertOptions import = convert("hf", "mgt", dir + "/hf", dir + "/back");
  import.seq_length = config.seq_length;
  CHECK(convert_checkpoint(import).destination == dir + "/back/iter_0000000");
  CHECK(convert_checkpoint(convert("mgt", "mgt", dir + "/mgt", dir + "/copy")).destination ==
        dir + "/copy/iter_0000005");
  for (const std::string& out : {dir + "/back", dir + "/copy"}) {
    INFO(out);
    CHECK_FALSE(fs::exists(out + "/.iter_0000005.tmp-0123456789abcdef"));
    CHECK_FALSE(fs::exists(out + "/latest_checkpointed_iteration.txt.tmp.AbCdEfGhIjKl"));
  }
  CHECK(bit_identical(read_mgt_model_weights(dir + "/back").at("embedding.word_embeddings.weight"),
                      read_mgt_model_weights(dir + "/mgt").at("embedding.word_embeddings.weight")));

  // A committed checkpoint is no leftover: still refused.
  CHECK_THROWS_WITH(convert_checkpoint(convert("mgt", "mgt", dir + "/mgt", dir + "/copy")), Contains("is not empty"));
}

TEST_CASE("GPT-2 --true-vocab-size truncates and --make-vocab-size-divisible-by pads with zeros", "[ckpt][hf]") {
  const std::string dir = test::scratch_dir("hf_vocab");
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  auto original = save_random_model(tiny_gpt2_config(), backend, dir + "/mgt");
  const std::vector<float> wte =
      original->parameters().read_param(original->parameters().entry("embedding.word_embeddings.weight"));

  ConvertOptions cut = convert("mgt", "hf", dir + "/mgt", dir + "/hf");
  cut.true_vocab_size = 20;
  const ConvertResult r = convert_checkpoint(cut);
  CHECK(r.vocabulary.destination_rows == 20);
  CHECK(r.vocabulary.true_vocab_size == 20);
  CHECK_THAT(file_bytes(dir + "/hf/config.json"), Contains("\"vocab_size\": 20"));
  const ckpt::SafetensorsReader st(dir + "/hf/model.safetensors");
  const auto* t = st.find("transformer.wte.weight");
  CHECK(t->shape == std::vector<std::int64_t>{20, 16});
  CHECK(bit_identical(st.read_float32(*t), std::vector<float>(wte.begin(), wte.begin() + 20 * 16)));

  ConvertOptions pad = convert("hf", "mgt", dir + "/hf", dir + "/padded");
  pad.make_vocab_size_divisible_by = 16;
  CHECK(convert_checkpoint(pad).vocabulary.destination_rows == 32);
  auto padded = load_checkpoint_model(open_model_checkpoint(dir + "/padded"), backend);
  const std::vector<float> back =
      padded->parameters().read_param(padded->parameters().entry("embedding.word_embeddings.weight"));
  CHECK(bit_identical(std::vector<float>(back.begin(), back.begin() + 20 * 16),
                      std::vector<float>(wte.begin(), wte.begin() + 20 * 16)));
  CHECK(std::all_of(back.begin() + 20 * 16, back.end(), [](float v) { return v == 0.0f; }));

  ConvertOptions too_many = convert("mgt", "hf", dir + "/mgt", dir + "/x");
  too_many.true_vocab_size = 33;
  CHECK_THROWS_WITH(convert_checkpoint(too_many), Contains("--true-vocab-size 33"));
}

TEST_CASE("GPT-2 import accepts GPT2Model names and refuses what it cannot read", "[ckpt][hf]") {
  const std::string dir = test::scratch_dir("hf_import_variants");
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  auto original = save_random_model(tiny_gpt2_config(), backend, dir + "/mgt");
  convert_checkpoint(convert("mgt", "hf", dir + "/mgt", dir + "/hf"));
  const ckpt::SafetensorsReader st(dir + "/hf/model.safetensors");
  const std::string config_text = file_bytes(dir + "/hf/config.json");

  // Re-save under other names: without "transformer.", with lm_head.weight and a mask buffer.
  auto resave = [&](const std::string& name, bool strip_prefix, bool lm_head, bool perturb_lm_head) {
    const std::string out = dir + "/" + name;
    std::filesystem::create_directories(out);
    std::ofstream(out + "/config.json") << config_text;
    std::vector<std::vector<float>> storage;
    storage.reserve(st.tensors().size() + 2);
    std::vector<ckpt::SafetensorsTensor> tensors;
    for (const auto& t : st.tensors()) {
      storage.push_back(st.read_float32(t));
      const std::string n = strip_prefix ? t.name.substr(std::string(kHfGpt2Prefix).size()) : t.name;
      tensors.push_back(ckpt::SafetensorsTensor::float32(n, t.shape, storage.back()));
      if (t.name == "transformer.wte.weight" && lm_head) {
        storage.push_back(storage.back());
        if (perturb_lm_head) storage.back()[0] += 1.0f;
        tensors.push_back(ckpt::SafetensorsTensor::float32("lm_head.weight", t.shape, storage.back()));
      }
    }
    storage.push_back(std::vector<float>(64, 1.0f));
    tensors.push_back(ckpt::SafetensorsTensor::float32("h.0.attn.bias", {1, 1, 8, 8}, storage.back()));
    ckpt::write_safetensors(out + "/model.safetensors", std::move(tensors));
    return out;
  };
  const ModelWeights plain = read_hf_gpt2_directory(resave("plain", true, true, false));
  const ModelWeights reference = read_mgt_model_weights(dir + "/mgt");
  CHECK(plain.tensors == reference.tensors);
  CHECK_THROWS_WITH(read_hf_gpt2_directory(resave("untied", false, true, true)),
                    Contains("lm_head.weight differs from the word embedding"));

  // --seq-length is bounded by n_positions (10 in this model).
  HfGpt2ReadOptions longer;
  longer.seq_length = 11;
  CHECK_THROWS_WITH(read_hf_gpt2_directory(dir + "/hf", longer), Contains("n_positions (10)"));
  HfGpt2ReadOptions shorter;
  shorter.seq_length = 4;
  CHECK(read_hf_gpt2_directory(dir + "/hf", shorter).config.seq_length == 4);

  // Pickles are never read; a missing tensor is named.
  std::filesystem::create_directories(dir + "/bin");
  std::ofstream(dir + "/bin/config.json") << config_text;
  std::ofstream(dir + "/bin/pytorch_model.bin") << "pickle";
  CHECK_THROWS_WITH(read_hf_gpt2_directory(dir + "/bin"), Contains("pytorch_model.bin") && Contains("safetensors"));
  std::filesystem::create_directories(dir + "/short");
  std::ofstream(dir + "/short/config.json") << config_text;
  const std::vector<float> one = {1.0f};
  ckpt::write_safetensors(dir + "/short/model.safetensors", {ckpt::SafetensorsTensor::float32("x", {1}, one)});
  CHECK_THROWS_WITH(read_hf_gpt2_directory(dir + "/short"), Contains("has no tensor 'transformer.wte.weight'"));

  // A weight that is not finite: the import refuses it, naming the tensor.
  const std::string nan_dir = dir + "/nan";
  std::filesystem::create_directories(nan_dir);
  std::ofstream(nan_dir + "/config.json") << config_text;
  std::vector<std::vector<float>> values;
  values.reserve(st.tensors().size());
  std::vector<ckpt::SafetensorsTensor> tensors;
  for (const auto& t : st.tensors()) {
    values.push_back(st.read_float32(t));
    if (t.name == "transformer.h.0.mlp.c_fc.weight") values.back()[3] = std::numeric_limits<float>::infinity();
    tensors.push_back(ckpt::SafetensorsTensor::float32(t.name, t.shape, values.back()));
  }
  ckpt::write_safetensors(nan_dir + "/model.safetensors", std::move(tensors));
  CHECK_THROWS_WITH(read_hf_model_directory(nan_dir), Contains("tensor 'decoder.layers.0.mlp.linear_fc1.weight' holds NaN or infinite values"));
}

TEST_CASE("GPT-2 exports in bf16 and in shards, and reads sharded directories", "[ckpt][hf]") {
  const std::string dir = test::scratch_dir("hf_gpt2_shards");
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  auto original = save_random_model(tiny_gpt2_config(), backend, dir + "/mgt");
  ConvertOptions sharded = convert("mgt", "hf", dir + "/mgt", dir + "/sharded");
  sharded.max_shard_bytes = 4096;
  convert_checkpoint(sharded);
  CHECK(std::filesystem::exists(dir + "/sharded/model.safetensors.index.json"));
  CHECK_FALSE(std::filesystem::exists(dir + "/sharded/model.safetensors"));
  CHECK(read_hf_gpt2_directory(dir + "/sharded").tensors == read_mgt_model_weights(dir + "/mgt").tensors);

  ConvertOptions narrow = convert("hf", "hf", dir + "/sharded", dir + "/bf16");
  narrow.hf_dtype = ckpt::SafetensorsDType::kBF16;
  convert_checkpoint(narrow);
  CHECK_THAT(file_bytes(dir + "/bf16/config.json"), Contains("\"torch_dtype\": \"bfloat16\""));
  const ckpt::SafetensorsReader st(dir + "/bf16/model.safetensors");
  CHECK(st.find("transformer.wte.weight")->dtype == ckpt::SafetensorsDType::kBF16);
}

// Run by tools/reference/verify_hf_export.py: mgt's logits for one sequence of token ids, from a
// checkpoint, so that the script can compare them with transformers' on the exported model.
// MGT_HF_LOGITS_CHECKPOINT: an mgt checkpoint; MGT_HF_LOGITS_TOKENS: int64 token ids;
// MGT_HF_LOGITS_OUTPUT: receives float32 logits [tokens, padded vocab].
TEST_CASE("hf logits reference exchange", "[.hf-logits-reference]") {
  const char* checkpoint_dir = std::getenv("MGT_HF_LOGITS_CHECKPOINT");
  const char* tokens_path = std::getenv("MGT_HF_LOGITS_TOKENS");
  const char* output_path = std::getenv("MGT_HF_LOGITS_OUTPUT");
  if (checkpoint_dir == nullptr || tokens_path == nullptr || output_path == nullptr) {
    WARN("set MGT_HF_LOGITS_CHECKPOINT, MGT_HF_LOGITS_TOKENS and MGT_HF_LOGITS_OUTPUT (see the script)");
    return;
  }
  const std::string bytes = file_bytes(tokens_path);
  std::vector<std::int64_t> tokens(bytes.size() / sizeof(std::int64_t));
  std::memcpy(tokens.data(), bytes.data(), tokens.size() * sizeof(std::int64_t));
  REQUIRE(!tokens.empty());
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  auto model = load_checkpoint_model(open_model_checkpoint(checkpoint_dir), backend);
  MicroBatch batch;
  batch.batch_size = 1;
  batch.seq_length = static_cast<std::int64_t>(tokens.size());
  batch.tokens = tokens;
  const std::vector<float> logits = model->forward_only(batch, true).logits;
  std::ofstream out(output_path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
  REQUIRE(out.good());
}
