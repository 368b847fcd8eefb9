// Hugging Face Qwen2-MoE interchange: the router, routed and shared experts, the shared experts'
// gate and the q/k/v biases mapped by name; transformers' logits and greedy tokens reproduced by
// mgt on the imported model (golden files from tools/reference/qwen2_moe_hf_reference.py); the
// flags the import records; round trips bit for bit; refusals that name the field or flag at
// fault.
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

const char* kGoldenDir = "hf-qwen2-moe-tiny";

// A Qwen2-MoE-shaped mgt model: q/k/v biases only, layer 1 dense, 4 experts of 12, top-2 without
// renormalisation, a gated shared expert of 10.
GptConfig qwen2_moe_config() {
  GptConfig c = model_testing::llama_like_config();
  c.num_layers = 3;
  c.rotary_percent = 1.0;
  c.max_position_embeddings = 16;
  c.add_qkv_bias = true;
  c.moe.num_experts = 4;
  c.moe.topk = 2;
  c.moe.ffn_hidden_size = 12;
  c.moe.layer_pattern = {true, false, true};
  c.moe.pre_softmax = true;
  c.moe.shared_expert_intermediate_size = 10;
  c.moe.shared_expert_gate = true;
  c.moe.aux_loss_coeff = 0.01;
  return c;
}

std::unique_ptr<GptModel> save_random_model(const GptConfig& config, Backend& backend, const std::string& dir) {
  return hf_testing::save_random_model(config, backend, dir, 23, R"({"eod": 2, "bos": 1})");
}

}  // namespace

TEST_CASE("Qwen2-MoE layout: router, experts, shared expert and its gate, q/k/v biases", "[ckpt][hf][qwen2_moe]") {
  GptConfig c = qwen2_moe_config();
  const auto mappings = hf_llama_tensor_mappings(c, kHfQwen2MoeModelType);
  CHECK(mappings.size() == gpt_parameter_table(c).entries.size());
  auto single = [&](const std::string& name) { return mapping_named(mappings, name).parts.at(0).hf_name; };
  CHECK(single("decoder.layers.0.mlp.router.weight") == "model.layers.0.mlp.gate.weight");
  CHECK(single("decoder.layers.2.mlp.shared_experts.gate_weight") == "model.layers.2.mlp.shared_expert_gate.weight");
  CHECK(single("decoder.layers.0.mlp.experts.local_experts.3.linear_fc2.weight") ==
        "model.layers.0.mlp.experts.3.down_proj.weight");
  CHECK(single("decoder.layers.2.mlp.shared_experts.linear_fc2.weight") ==
        "model.layers.2.mlp.shared_expert.down_proj.weight");
  CHECK(single("decoder.layers.1.mlp.linear_fc2.weight") == "model.layers.1.mlp.down_proj.weight");
  const auto& fc1 = mapping_named(mappings, "decoder.layers.2.mlp.experts.local_experts.1.linear_fc1.weight");
  REQUIRE(fc1.parts.size() == 2);
  CHECK(fc1.parts[0].hf_name == "model.layers.2.mlp.experts.1.gate_proj.weight");
  CHECK(fc1.parts[1].hf_name == "model.layers.2.mlp.experts.1.up_proj.weight");
  CHECK(fc1.parts[0].hf_shape == std::vector<std::int64_t>{12, 16});
  const auto& shared = mapping_named(mappings, "decoder.layers.0.mlp.shared_experts.linear_fc1.weight");
  CHECK(shared.parts[0].hf_name == "model.layers.0.mlp.shared_expert.gate_proj.weight");
  CHECK(shared.parts[1].hf_shape == std::vector<std::int64_t>{10, 16});
  // The q/k/v bias split like the weight's rows: per query group, its queries, then k, then v.
  const auto& bias = mapping_named(mappings, "decoder.layers.1.self_attention.linear_qkv.bias");
  REQUIRE(bias.parts.size() == 3);
  CHECK(bias.parts[0].hf_name == "model.layers.1.self_attn.q_proj.bias");
  CHECK(bias.parts[2].hf_shape == std::vector<std::int64_t>{16});
  for (const auto& m : mappings) CHECK(m.megatron_name.find("linear_proj.bias") == std::string::npos);

  // Qwen2MoeSparseMoeBlock's order: the router, the experts (gate, up, down each), the shared
  // expert, its gate; then the norms.
  const auto at = [](const std::string& name) { return hf_llama_state_dict_position("model.layers.0." + name); };
  const std::vector<std::string> order = {
      "self_attn.q_proj.weight",          "self_attn.q_proj.bias",
      "self_attn.o_proj.weight",          "mlp.gate.weight",
      "mlp.experts.0.gate_proj.weight",   "mlp.experts.0.up_proj.weight",
      "mlp.experts.0.down_proj.weight",   "mlp.experts.10.gate_proj.weight",
      "mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.down_proj.weight",
      "mlp.shared_expert_gate.weight",    "input_layernorm.weight"};
  for (std::size_t i = 1; i < order.size(); ++i) {
    INFO(order[i - 1] << " before " << order[i]);
    CHECK(at(order[i - 1]) < at(order[i]));
  }
}

TEST_CASE("An imported Qwen2-MoE gives transformers' logits and greedy tokens", "[ckpt][hf][qwen2_moe]") {
  const GoldenGeneration golden = golden_generation("hf_qwen2_moe_logits.json");
  const ModelCheckpoint checkpoint = import_golden(kGoldenDir, "hf_qwen2_moe_golden");
  const GptConfig& c = checkpoint.config;
  CHECK_FALSE(c.add_bias_linear);
  CHECK(c.add_qkv_bias);
  CHECK(c.ffn_hidden_size == 40);
  const MoeConfig& moe = c.moe;
  CHECK(moe.num_experts == 4);
  CHECK(moe.topk == 2);
  CHECK(moe.ffn_hidden_size == 16);
  CHECK(moe.layer_pattern == std::vector<bool>{true, false, true});
  CHECK(moe.pre_softmax);  // norm_topk_prob false
  CHECK(moe.shared_expert_intermediate_size == 24);
  CHECK(moe.shared_expert_gate);
  CHECK(moe.aux_loss_coeff == 0.02);
  CHECK(c.norm_epsilon == 1e-6);
  CHECK(c.rotary_base == 1e6);
  CHECK_THAT(checkpoint.metadata.args_json,
             Contains("\"add_qkv_bias\": true") && Contains("\"moe_shared_expert_gate\": true") &&
                 Contains("\"moe_router_pre_softmax\": true") && Contains("\"moe_layer_freq\": \"[1,0,1]\"") &&
                 Contains("\"moe_shared_expert_intermediate_size\": 24"));
  CHECK(checkpoint.metadata.extra_json.at("hf_architecture") ==
        R"({"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe"})");
  check_golden_generation(checkpoint, golden);
}

TEST_CASE("Hugging Face Qwen2-MoE to mgt and back is byte for byte", "[ckpt][hf][qwen2_moe]") {
  const std::string dir = test::scratch_dir("hf_qwen2_moe_round_trip");
  const std::string golden_weights = file_bytes(golden_path(std::string(kGoldenDir) + "/model.safetensors"));
  convert_checkpoint(convert("hf", "mgt", golden_path(kGoldenDir), dir + "/mgt"));
  convert_checkpoint(convert("mgt", "hf", dir + "/mgt", dir + "/hf"));
  CHECK(file_bytes(dir + "/hf/model.safetensors") == golden_weights);
  const std::string config = file_bytes(dir + "/hf/config.json");
  CHECK_THAT(config, Contains("\"Qwen2MoeForCausalLM\"") && Contains("\"model_type\": \"qwen2_moe\"") &&
                         Contains("\"num_experts\": 4") && Contains("\"num_experts_per_tok\": 2") &&
                         Contains("\"moe_intermediate_size\": 16") && Contains("\"intermediate_size\": 40") &&
                         Contains("\"shared_expert_intermediate_size\": 24") &&
                         Contains("\"norm_topk_prob\": false") && Contains("\"qkv_bias\": true") &&
                         Contains("\"mlp_only_layers\": [\n        1\n    ]") && Contains("\"decoder_sparse_step\": 1") &&
                         Contains("\"use_sliding_window\": false") && Contains("\"router_aux_loss_coef\": 0.02"));
  // Read back, config.json describes the same model.
  const HfLlamaConfig back = parse_hf_llama_config_json(config, "config.json");
  const HfLlamaConfig golden =
      parse_hf_llama_config_json(file_bytes(golden_path(std::string(kGoldenDir) + "/config.json")), "config.json");
  CHECK(model_args_json(gpt_config_of(back, 64, 128)) == model_args_json(gpt_config_of(golden, 64, 128)));
  // A tensor-parallel layout of two ranks exports the same bytes.
  ConvertOptions reshard = convert("mgt", "mgt", dir + "/mgt", dir + "/tp2");
  reshard.target_tensor_parallel_size = 2;
  convert_checkpoint(reshard);
  convert_checkpoint(convert("mgt", "hf", dir + "/tp2", dir + "/hf2"));
  CHECK(file_bytes(dir + "/hf2/model.safetensors") == golden_weights);
}

TEST_CASE("mgt mixtures of experts with a gated shared expert to Qwen2-MoE and back are bit-exact",
          "[ckpt][hf][qwen2_moe]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  const std::string dir = test::scratch_dir("hf_qwen2_moe_mgt_round_trip");
  const GptConfig config = qwen2_moe_config();
  auto original = save_random_model(config, backend, dir + "/mgt");
  // No record of an architecture: a gated shared expert is written as Qwen2-MoE.
  const ConvertResult exported = convert_checkpoint(convert("mgt", "hf", dir + "/mgt", dir + "/hf"));
  CHECK(exported.parameters == config.num_parameters());
  CHECK_THAT(file_bytes(dir + "/hf/config.json"),
             Contains("\"Qwen2MoeForCausalLM\"") && Contains("\"mlp_only_layers\": [\n        1\n    ]") &&
                 Contains("\"intermediate_size\": 24") && Contains("\"moe_intermediate_size\": 12") &&
                 Contains("\"norm_topk_prob\": false") && Contains("\"bos_token_id\": 1"));
  const ckpt::SafetensorsModelFiles files(dir + "/hf");
  CHECK(files.find("model.layers.2.mlp.shared_expert_gate.weight") != nullptr);
  CHECK(files.find("model.layers.1.mlp.gate_proj.weight") != nullptr);

  GptConfig expected = config;
  expected.hidden_dropout = 0.0;
  check_reimport(*original, expected, dir + "/hf", dir + "/back", backend);

  // norm_topk_prob true is Megatron's default routing (the softmax over the chosen experts).
  GptConfig renormalised = config;
  renormalised.moe.pre_softmax = false;
  const HfLlamaConfig hf = hf_llama_config_of(renormalised, kHfQwen2MoeModelType, 32, 1, 2, "float32");
  CHECK(hf.norm_topk_prob);
  CHECK_FALSE(gpt_config_of(parse_hf_llama_config_json(hf_llama_config_json(hf), "c.json"), 8, 32).moe.pre_softmax);
}

TEST_CASE("Qwen2-MoE refusals name the config field or flag", "[ckpt][hf][qwen2_moe]") {
  const std::string dir = test::scratch_dir("hf_qwen2_moe_refusals");
  CHECK_THAT(refusal(edited_golden(dir, kGoldenDir, "use_sliding_window", "true")),
             Contains("config.json") && Contains("use_sliding_window is true with sliding_window 0"));
  CHECK_THAT(refusal(edited_golden(dir, kGoldenDir, "mlp_only_layers", "[3]")),
             Contains("mlp_only_layers' entry must be between 0 and 2 (got 3)"));
  CHECK_THAT(refusal(edited_golden(dir, kGoldenDir, "decoder_sparse_step", "4")),
             Contains("decoder_sparse_step 4 and mlp_only_layers leave no sparse layer"));
  CHECK_THAT(refusal(edited_golden(dir, kGoldenDir, "shared_expert_intermediate_size", "0")),
             Contains("shared_expert_intermediate_size must be between 1"));
  CHECK_THAT(refusal(edited_golden(dir, kGoldenDir, "num_experts_per_tok", "5")),
             Contains("num_experts_per_tok must be between 1 and 4 (got 5)"));
  // Layer 2 dense instead of 1: the weights say otherwise, by name.
  CHECK_THAT(refusal(edited_golden(dir, kGoldenDir, "mlp_only_layers", "[2]")),
             Contains("no tensor 'model.layers.1.mlp.gate.weight'"));

  // Exports refuse what Qwen2-MoE cannot express, before writing anything.
  GptConfig c = qwen2_moe_config();
  c.moe.shared_expert_gate = false;
  CHECK_THAT(export_refusal(c, dir + "/ungated", "qwen2_moe"),
             Contains("cannot be expressed as Qwen2Moe: no --moe-shared-expert-gate"));
  c = qwen2_moe_config();
  c.moe.capacity_factor = 1.0;
  CHECK_THAT(export_refusal(c, dir + "/capacity"), Contains("--moe-expert-capacity-factor (Qwen2-MoE drops no tokens)"));
  c = qwen2_moe_config();
  c.moe.score_function = MoeScoreFunction::kSigmoid;
  CHECK_THAT(export_refusal(c, dir + "/sigmoid"), Contains("--moe-router-score-function sigmoid"));
  CHECK_THAT(export_refusal(qwen2_moe_config(), dir + "/as-mixtral", "mixtral"),
             Contains("cannot be expressed as Mixtral"));
  c = qwen2_moe_config();
  c.moe.shared_expert_gate = false;
  c.moe.shared_expert_intermediate_size = 0;
  c.moe.pre_softmax = false;
  c.add_qkv_bias = false;
  c.moe.layer_pattern = {true, true, true};
  CHECK_THAT(export_refusal(c, dir + "/unshared", "qwen2_moe"), Contains("no --moe-shared-expert-intermediate-size"));
  GptConfig dense = model_testing::llama_like_config();
  dense.rotary_percent = 1.0;
  dense.add_qkv_bias = true;
  CHECK_THAT(export_refusal(dense, dir + "/qkv-llama", "llama"),
             Contains("cannot be expressed as Llama: --add-qkv-bias"));
}

TEST_CASE("Qwen2-MoE config.json defaults", "[ckpt][hf][qwen2_moe]") {
  // Qwen2MoeConfig's defaults for what config.json leaves out (Qwen1.5-MoE-A2.7B's routing).
  const HfLlamaConfig d = parse_hf_llama_config_json(
      R"({"model_type": "qwen2_moe", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 8,
          "num_hidden_layers": 2, "num_attention_heads": 2})", "c.json");
  CHECK(d.num_local_experts == 60);
  CHECK(d.num_experts_per_tok == 4);
  CHECK(d.moe_intermediate_size == 1408);
  CHECK(d.shared_expert_intermediate_size == 5632);
  CHECK_FALSE(d.norm_topk_prob);
  CHECK(d.qkv_bias);
  CHECK(d.rms_norm_eps == 1e-6);
  CHECK(d.max_position_embeddings == 32768);
  const GptConfig c = gpt_config_of(d, 16, 32);
  CHECK(c.add_qkv_bias);
  CHECK_FALSE(c.add_bias_linear);
  CHECK(c.moe.pre_softmax);
  CHECK(c.moe.shared_expert_gate);
  CHECK(c.moe.layer_pattern == std::vector<bool>{true, true});
}
