// Hugging Face Mixtral interchange: the router and expert mapping on known values, transformers'
// logits and greedy tokens reproduced by mgt on the imported model (golden files from
// tools/reference/mixtral_hf_reference.py), the routing flags the import records, round trips
// bit for bit, and refusals that name the field or flag at fault.
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
#include "ckpt/hf_directory_files.hpp"
#include "ckpt/hf_llama_config.hpp"
#include "ckpt/hf_llama_layout.hpp"
#include "ckpt/hf_model_directory.hpp"
#include "ckpt/model_checkpoint.hpp"
#include "ckpt/model_weights.hpp"
#include "ckpt/safetensors_model_files.hpp"
#include "core/error.hpp"
#include "kernels/backend_factory.hpp"
#include "model/kv_cache.hpp"
#include "model/parameter_table.hpp"
#include "hf_testing.hpp"
#include "test_paths.hpp"

using namespace mgt;
using namespace mgt::hf_testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// A Mixtral-shaped mgt model: rotary, RMSNorm, SwiGLU, grouped-query attention, untied, every
// layer 4 experts of 12, top-2.
GptConfig mixtral_config() {
  GptConfig c = model_testing::llama_like_config();
  c.rotary_percent = 1.0;
  c.rotary_base = 1e6;
  c.max_position_embeddings = 16;
  c.moe.num_experts = 4;
  c.moe.topk = 2;
  c.moe.ffn_hidden_size = 12;
  c.moe.layer_pattern = {true, true};
  c.moe.aux_loss_coeff = 0.01;
  return c;
}

std::unique_ptr<GptModel> save_random_model(const GptConfig& config, Backend& backend, const std::string& dir) {
  return hf_testing::save_random_model(config, backend, dir, 21, R"({"eod": 2, "bos": 1})");
}

}  // namespace

TEST_CASE("Mixtral layout: router, experts' w1/w3 halves and w2, in save_pretrained's order", "[ckpt][hf][mixtral]") {
  GptConfig c = mixtral_config();
  c.moe.ffn_hidden_size = 2;
  c.hidden_size = 2;
  c.kv_channels = 2;
  c.num_attention_heads = 2;
  c.num_query_groups = 1;
  const auto mappings = hf_llama_tensor_mappings(c);
  auto single = [&](const std::string& name) { return mapping_named(mappings, name).parts.at(0).hf_name; };
  CHECK(single("decoder.layers.1.mlp.router.weight") == "model.layers.1.block_sparse_moe.gate.weight");
  CHECK(single("decoder.layers.0.mlp.experts.local_experts.3.linear_fc2.weight") ==
        "model.layers.0.block_sparse_moe.experts.3.w2.weight");
  const auto& fc1 = mapping_named(mappings, "decoder.layers.1.mlp.experts.local_experts.2.linear_fc1.weight");
  REQUIRE(fc1.parts.size() == 2);
  CHECK(fc1.parts[0].hf_name == "model.layers.1.block_sparse_moe.experts.2.w1.weight");
  CHECK(fc1.parts[1].hf_name == "model.layers.1.block_sparse_moe.experts.2.w3.weight");
  CHECK(fc1.parts[0].hf_shape == std::vector<std::int64_t>{2, 2});
  // Megatron's fc1 rows: the gate half (w1), then the up half (w3).
  const auto halves = to_hf_parts(fc1, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(halves[0] == std::vector<float>{1, 2, 3, 4});
  CHECK(halves[1] == std::vector<float>{5, 6, 7, 8});
  CHECK(from_hf_parts(fc1, halves) == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(mappings.size() == gpt_parameter_table(c).entries.size());

  // MixtralDecoderLayer's order: attention, the sparse block (gate, then experts 0, 1, … each
  // w1, w2, w3; expert 10 after expert 9), then the norms.
  const auto at = [](const std::string& name) { return hf_llama_state_dict_position("model.layers.0." + name); };
  const std::vector<std::string> order = {
      "self_attn.o_proj.weight",        "block_sparse_moe.gate.weight",
      "block_sparse_moe.experts.0.w1.weight", "block_sparse_moe.experts.0.w2.weight",
      "block_sparse_moe.experts.0.w3.weight", "block_sparse_moe.experts.1.w1.weight",
      "block_sparse_moe.experts.9.w3.weight", "block_sparse_moe.experts.10.w1.weight",
      "input_layernorm.weight",         "post_attention_layernorm.weight"};
  for (std::size_t i = 1; i < order.size(); ++i) {
    INFO(order[i - 1] << " before " << order[i]);
    CHECK(at(order[i - 1]) < at(order[i]));
  }
  CHECK(hf_llama_state_dict_position("model.layers.0.post_attention_layernorm.weight") <
        hf_llama_state_dict_position("model.layers.1.self_attn.q_proj.weight"));
}

TEST_CASE("An imported Mixtral gives transformers' logits and greedy tokens", "[ckpt][hf][mixtral]") {
  const GoldenGeneration golden = golden_generation("hf_mixtral_logits.json");
  const ModelCheckpoint checkpoint = import_golden("hf-mixtral-tiny", "hf_mixtral_golden");
  // Mixtral's routing in Megatron's flags: top-2 of 4 experts, softmax after the choice.
  const MoeConfig& moe = checkpoint.config.moe;
  CHECK(moe.num_experts == 4);
  CHECK(moe.topk == 2);
  CHECK(moe.ffn_hidden_size == 24);
  CHECK(moe.num_moe_layers() == 2);
  CHECK(moe.score_function == MoeScoreFunction::kSoftmax);
  CHECK_FALSE(moe.pre_softmax);
  CHECK_FALSE(moe.drops_tokens());
  CHECK(moe.aux_loss_coeff == 0.02);
  CHECK(moe.shared_expert_intermediate_size == 0);
  CHECK(checkpoint.config.rotary_base == 1e6);
  CHECK(checkpoint.config.query_groups() == 2);
  CHECK_THAT(checkpoint.metadata.args_json,
             Contains("\"num_experts\": 4") && Contains("\"moe_router_topk\": 2") &&
                 Contains("\"moe_router_pre_softmax\": false") &&
                 Contains("\"moe_router_score_function\": \"softmax\"") &&
                 Contains("\"moe_layer_freq\": \"[1,1]\"") && Contains("\"moe_aux_loss_coeff\": 0.02"));
  CHECK(checkpoint.metadata.extra_json.at("hf_architecture") ==
        R"({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "sliding_window": null})");
  check_golden_generation(checkpoint, golden);
}

TEST_CASE("Hugging Face Mixtral to mgt and back is byte for byte", "[ckpt][hf][mixtral]") {
  const std::string dir = test::scratch_dir("hf_mixtral_round_trip");
  convert_checkpoint(convert("hf", "mgt", golden_path("hf-mixtral-tiny"), dir + "/mgt"));
  convert_checkpoint(convert("mgt", "hf", dir + "/mgt", dir + "/hf"));
  CHECK(file_bytes(dir + "/hf/model.safetensors") == file_bytes(golden_path("hf-mixtral-tiny/model.safetensors")));
  const std::string config = file_bytes(dir + "/hf/config.json");
  CHECK_THAT(config, Contains("\"MixtralForCausalLM\"") && Contains("\"model_type\": \"mixtral\"") &&
                         Contains("\"num_local_experts\": 4") && Contains("\"num_experts_per_tok\": 2") &&
                         Contains("\"intermediate_size\": 24") && Contains("\"router_aux_loss_coef\": 0.02") &&
                         Contains("\"router_jitter_noise\": 0.0") && Contains("\"sliding_window\": null") &&
                         Contains("\"rope_theta\": 1000000.0") && Contains("\"tie_word_embeddings\": false") &&
                         !Contains("attention_bias"));
  // Read back, config.json describes the same model.
  const HfLlamaConfig back = parse_hf_llama_config_json(config, "config.json");
  const HfLlamaConfig golden =
      parse_hf_llama_config_json(file_bytes(golden_path("hf-mixtral-tiny/config.json")), "config.json");
  CHECK(model_args_json(gpt_config_of(back, 64, 128)) == model_args_json(gpt_config_of(golden, 64, 128)));
  // hf → hf keeps the architecture; a layout change keeps the record.
  convert_checkpoint(convert("hf", "hf", golden_path("hf-mixtral-tiny"), dir + "/hf2"));
  CHECK(file_bytes(dir + "/hf2/model.safetensors") == file_bytes(golden_path("hf-mixtral-tiny/model.safetensors")));
  ConvertOptions reshard = convert("mgt", "mgt", dir + "/mgt", dir + "/tp2");
  reshard.target_tensor_parallel_size = 2;
  convert_checkpoint(reshard);
  convert_checkpoint(convert("mgt", "hf", dir + "/tp2", dir + "/hf3"));
  CHECK(file_bytes(dir + "/hf3/model.safetensors") == file_bytes(golden_path("hf-mixtral-tiny/model.safetensors")));
}

TEST_CASE("mgt mixtures of experts to Hugging Face Mixtral and back are bit-exact", "[ckpt][hf][mixtral]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  const std::string dir = test::scratch_dir("hf_mixtral_mgt_round_trip");
  const GptConfig config = mixtral_config();
  auto original = save_random_model(config, backend, dir + "/mgt");
  // No record of an architecture: a mixture of experts is written as Mixtral; in shards.
  ConvertOptions out = convert("mgt", "hf", dir + "/mgt", dir + "/hf");
  out.max_shard_bytes = 4000;
  const ConvertResult exported = convert_checkpoint(out);
  CHECK(exported.parameters == config.num_parameters());
  CHECK_THAT(file_bytes(dir + "/hf/config.json"),
             Contains("\"MixtralForCausalLM\"") && Contains("\"num_local_experts\": 4") &&
                 Contains("\"intermediate_size\": 12") && Contains("\"router_aux_loss_coef\": 0.01") &&
                 Contains("\"bos_token_id\": 1") && Contains("\"eos_token_id\": 2"));
  const ckpt::SafetensorsModelFiles files(dir + "/hf");
  CHECK(files.find("model.layers.1.block_sparse_moe.experts.3.w3.weight") != nullptr);
  CHECK_FALSE(fs::exists(dir + "/hf/model.safetensors"));

  GptConfig expected = config;
  expected.hidden_dropout = 0.0;  // Mixtral has no residual dropout to carry
  expected.ffn_hidden_size = config.moe.ffn_hidden_size;  // intermediate_size is the experts'
  check_reimport(*original, expected, dir + "/hf", dir + "/back", backend);
}

TEST_CASE("Mixtral refusals name the config field, tensor or flag", "[ckpt][hf][mixtral]") {
  const std::string dir = test::scratch_dir("hf_mixtral_refusals");
  CHECK_THAT(refusal(edited_golden(dir, "hf-mixtral-tiny", "router_jitter_noise", "0.01")),
             Contains("config.json") && Contains("router_jitter_noise 0.01 is not 0"));
  CHECK_THAT(refusal(edited_golden(dir, "hf-mixtral-tiny", "num_experts_per_tok", "5")),
             Contains("num_experts_per_tok must be between 1 and num_local_experts (4) (got 5)"));
  CHECK_THAT(refusal(edited_golden(dir, "hf-mixtral-tiny", "sliding_window", "8")),
             Contains("sliding_window 8 is shorter than max_position_embeddings (64)"));
  // More experts than the weights have: the router's shape is named.
  CHECK_THAT(refusal(edited_golden(dir, "hf-mixtral-tiny", "num_local_experts", "5")),
             Contains("'model.layers.0.block_sparse_moe.gate.weight' has shape [4, 32]") && Contains("[5, 32]"));
  CHECK_THAT(refusal(edited_golden(dir, "hf-mixtral-tiny", "intermediate_size", "12")),
             Contains("'model.layers.0.block_sparse_moe.experts.0.w1.weight' has shape [24, 32]") &&
                 Contains("[12, 32]"));

  // Exports refuse what Mixtral cannot express, before writing anything.
  GptConfig c = mixtral_config();
  c.moe.pre_softmax = true;
  CHECK_THAT(export_refusal(c, dir + "/pre"), Contains("cannot be expressed as Mixtral: --moe-router-pre-softmax"));
  c = mixtral_config();
  c.moe.shared_expert_intermediate_size = 8;
  CHECK_THAT(export_refusal(c, dir + "/shared"), Contains("--moe-shared-expert-intermediate-size"));
  c = mixtral_config();
  c.moe.layer_pattern = {false, true};
  CHECK_THAT(export_refusal(c, dir + "/dense"), Contains("--moe-layer-freq with dense layers"));
  c = mixtral_config();
  c.moe.capacity_factor = 1.0;
  CHECK_THAT(export_refusal(c, dir + "/capacity"), Contains("--moe-expert-capacity-factor (Mixtral drops no tokens)"));
  c = mixtral_config();
  c.moe.score_function = MoeScoreFunction::kSigmoid;
  CHECK_THAT(export_refusal(c, dir + "/sigmoid"), Contains("--moe-router-score-function sigmoid"));
  c = mixtral_config();
  c.moe.apply_probs_on_input = true;
  CHECK_THAT(export_refusal(c, dir + "/probs-on-input"),
             Contains("--moe-apply-probs-on-input (Mixtral weights the experts' outputs)"));
  c = mixtral_config();
  c.moe.load_balancing = MoeLoadBalancing::kSinkhorn;
  CHECK_THAT(export_refusal(c, dir + "/sinkhorn"), Contains("--moe-router-load-balancing-type sinkhorn"));
  CHECK_THAT(export_refusal(mixtral_config(), dir + "/as-llama", "llama"),
             Contains("cannot be expressed as Llama: --num-experts 4") && Contains("write it as mixtral"));
  c = mixtral_config();
  c.moe = MoeConfig{};
  CHECK_THAT(export_refusal(c, dir + "/dense-as-mixtral", "mixtral"),
             Contains("cannot be expressed as Mixtral") && Contains("a dense MLP"));
}

TEST_CASE("Mixtral import names transformers 5's fused experts", "[ckpt][hf][mixtral]") {
  // save_pretrained(save_original_format=False) keeps transformers 5's in-memory names.
  const std::string dir = test::scratch_dir("hf_mixtral_fused");
  const ModelWeights golden = read_hf_model_directory(golden_path("hf-mixtral-tiny"));
  CHECK(golden.config.moe.num_experts == 4);
  std::vector<HfExportTensor> tensors;
  for (const HfLlamaTensorMapping& m : hf_llama_tensor_mappings(golden.config)) {
    std::vector<std::vector<float>> parts = to_hf_parts(m, golden.at(m.megatron_name));
    for (std::size_t i = 0; i < parts.size(); ++i)
      if (m.parts[i].hf_name.find(".block_sparse_moe.") == std::string::npos)
        tensors.push_back({m.parts[i].hf_name, m.parts[i].hf_shape, std::move(parts[i])});
  }
  for (const char* layer : {"0", "1"}) {
    const std::string mlp = std::string("model.layers.") + layer + ".mlp.";
    tensors.push_back({mlp + "gate.weight", {4, 32}, std::vector<float>(4 * 32)});
    tensors.push_back({mlp + "experts.gate_up_proj", {4, 48, 32}, std::vector<float>(4 * 48 * 32)});
    tensors.push_back({mlp + "experts.down_proj", {4, 32, 24}, std::vector<float>(4 * 32 * 24)});
  }
  write_hf_export_directory(dir + "/fused", file_bytes(golden_path("hf-mixtral-tiny/config.json")), tensors, {});
  CHECK_THAT(refusal(dir + "/fused"), Contains("have no tensor 'model.layers.0.block_sparse_moe.gate.weight'") &&
                                          Contains("transformers 5's fused experts") &&
                                          Contains("save_original_format=True"));
}

TEST_CASE("Mixtral config.json from an MoE configuration and back", "[ckpt][hf][mixtral]") {
  GptConfig c = mixtral_config();
  HfLlamaConfig hf = hf_llama_config_of(c, kHfMixtralModelType, 32, 1, 2, "float32");
  CHECK(hf.num_local_experts == 4);
  CHECK(hf.num_experts_per_tok == 2);
  CHECK(hf.intermediate_size == 12);  // the experts' size, not --ffn-hidden-size
  CHECK(hf.router_aux_loss_coef == 0.01);
  const HfLlamaConfig back = parse_hf_llama_config_json(hf_llama_config_json(hf), "c.json");
  const GptConfig again = gpt_config_of(back, c.seq_length, 32);
  CHECK(again.moe.num_experts == 4);
  CHECK(again.moe.topk == 2);
  CHECK(again.moe.ffn_hidden_size == 12);
  CHECK(again.moe.aux_loss_coeff == 0.01);
  CHECK(again.moe.layer_pattern == std::vector<bool>{true, true});
  // Without load balancing the coefficient does nothing in mgt; Mixtral's equivalent is 0.
  c.moe.load_balancing = MoeLoadBalancing::kNone;
  CHECK(hf_llama_config_of(c, kHfMixtralModelType, 32, 1, 2, "float32").router_aux_loss_coef == 0.0);
  // MixtralConfig's defaults for what config.json leaves out: 8 experts, top-2, rope_theta 1e6.
  const HfLlamaConfig defaults = parse_hf_llama_config_json(
      R"({"model_type": "mixtral", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 8,
          "num_hidden_layers": 1, "num_attention_heads": 2})", "c.json");
  CHECK(defaults.num_local_experts == 8);
  CHECK(defaults.num_experts_per_tok == 2);
  CHECK(defaults.rope_theta == 1e6);
  CHECK(defaults.rms_norm_eps == 1e-5);
  CHECK(defaults.max_position_embeddings == 4096 * 32);
}
