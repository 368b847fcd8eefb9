// Hugging Face Qwen3 and Qwen3-MoE interchange: the query and key norms (q_norm, k_norm) mapped to
// --qk-layernorm's q_layernorm and k_layernorm, head_dim apart from hidden size / heads, Qwen3-MoE's
// sparse blocks named as Qwen2-MoE's without a shared expert; transformers' logits and greedy
// tokens reproduced by mgt on the imported models (golden files from
// tools/reference/qwen3_hf_reference.py); round trips byte for byte; refusals that name the field
// or flag at fault.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../model/model_testing.hpp"
#include "ckpt/convert_job.hpp"
#include "ckpt/hf_llama_config.hpp"
#include "ckpt/hf_llama_layout.hpp"
#include "ckpt/model_checkpoint.hpp"
#include "kernels/backend_factory.hpp"
#include "model/parameter_table.hpp"
#include "hf_testing.hpp"
#include "test_paths.hpp"

using namespace mgt;
using namespace mgt::hf_testing;
using Catch::Matchers::Contains;

namespace {

const char* kDenseDir = "hf-qwen3-tiny";
const char* kMoeDir = "hf-qwen3-moe-tiny";

// A Qwen3-shaped mgt model: q/k norms, no biases, GQA with head_dim 8 of hidden 16 / 4 heads.
GptConfig qwen3_config() {
  GptConfig c = model_testing::llama_like_config();
  c.rotary_percent = 1.0;
  c.max_position_embeddings = 16;
  c.qk_layernorm = true;
  c.kv_channels = 6;
  return c;
}

}  // namespace

TEST_CASE("Qwen3 layout: the query and key norms by name, in the attention's order", "[ckpt][hf][qwen3]") {
  const GptConfig c = qwen3_config();
  const auto mappings = hf_llama_tensor_mappings(c, kHfQwen3ModelType);
  CHECK(mappings.size() == gpt_parameter_table(c).entries.size());
  auto single = [&](const std::string& name) { return mapping_named(mappings, name).parts.at(0).hf_name; };
  CHECK(single("decoder.layers.1.self_attention.q_layernorm.weight") == "model.layers.1.self_attn.q_norm.weight");
  CHECK(single("decoder.layers.0.self_attention.k_layernorm.weight") == "model.layers.0.self_attn.k_norm.weight");
  CHECK(mapping_named(mappings, "decoder.layers.0.self_attention.q_layernorm.weight").parts.at(0).hf_shape ==
        std::vector<std::int64_t>{6});
  // Qwen3Attention registers q_proj, k_proj, v_proj, o_proj, q_norm, k_norm; the MLP follows.
  const auto at = [](const std::string& name) { return hf_llama_state_dict_position("model.layers.0." + name); };
  const std::vector<std::string> order = {"self_attn.o_proj.weight", "self_attn.q_norm.weight",
                                          "self_attn.k_norm.weight", "mlp.gate.weight",
                                          "mlp.experts.0.gate_proj.weight", "input_layernorm.weight"};
  CHECK(at("self_attn.k_norm.weight") < at("mlp.gate_proj.weight"));
  for (std::size_t i = 1; i < order.size(); ++i) {
    INFO(order[i - 1] << " before " << order[i]);
    CHECK(at(order[i - 1]) < at(order[i]));
  }
}

TEST_CASE("An imported Qwen3 gives transformers' logits and greedy tokens", "[ckpt][hf][qwen3]") {
  const GoldenGeneration golden = golden_generation("hf_qwen3_logits.json");
  const ModelCheckpoint checkpoint = import_golden(kDenseDir, "hf_qwen3_golden");
  const GptConfig& c = checkpoint.config;
  CHECK(c.qk_layernorm);
  CHECK_FALSE(c.add_bias_linear);
  CHECK_FALSE(c.add_qkv_bias);
  CHECK(c.kv_channels == 16);
  CHECK(c.hidden_size == 32);
  CHECK_FALSE(c.untie_embeddings_and_output_weights);
  CHECK_FALSE(c.moe.enabled());
  CHECK(c.rotary_base == 1e6);
  CHECK_THAT(checkpoint.metadata.args_json, Contains("\"qk_layernorm\": true") && Contains("\"kv_channels\": 16"));
  CHECK(checkpoint.metadata.extra_json.at("hf_architecture") ==
        R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"})");
  check_golden_generation(checkpoint, golden);
}

TEST_CASE("An imported Qwen3-MoE gives transformers' logits and greedy tokens", "[ckpt][hf][qwen3]") {
  const GoldenGeneration golden = golden_generation("hf_qwen3_moe_logits.json");
  const ModelCheckpoint checkpoint = import_golden(kMoeDir, "hf_qwen3_moe_golden");
  const GptConfig& c = checkpoint.config;
  CHECK(c.qk_layernorm);
  CHECK(c.untie_embeddings_and_output_weights);
  CHECK(c.ffn_hidden_size == 40);
  const MoeConfig& moe = c.moe;
  CHECK(moe.num_experts == 4);
  CHECK(moe.topk == 2);
  CHECK(moe.ffn_hidden_size == 16);
  CHECK(moe.layer_pattern == std::vector<bool>{true, false, true});
  CHECK_FALSE(moe.pre_softmax);  // norm_topk_prob true: Megatron's default routing
  CHECK(moe.shared_expert_intermediate_size == 0);
  CHECK(moe.aux_loss_coeff == 0.02);
  CHECK(checkpoint.metadata.extra_json.at("hf_architecture") ==
        R"({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe"})");
  check_golden_generation(checkpoint, golden);
}

TEST_CASE("Hugging Face Qwen3 and Qwen3-MoE to mgt and back are byte for byte", "[ckpt][hf][qwen3]") {
  for (const char* name : {kDenseDir, kMoeDir}) {
    INFO(name);
    const std::string dir = test::scratch_dir(std::string("hf_qwen3_round_trip_") + name);
    const std::string golden_weights = file_bytes(golden_path(std::string(name) + "/model.safetensors"));
    convert_checkpoint(convert("hf", "mgt", golden_path(name), dir + "/mgt"));
    convert_checkpoint(convert("mgt", "hf", dir + "/mgt", dir + "/hf"));
    CHECK(file_bytes(dir + "/hf/model.safetensors") == golden_weights);
    // Read back, config.json describes the same model.
    const std::string config = file_bytes(dir + "/hf/config.json");
    const HfLlamaConfig back = parse_hf_llama_config_json(config, "config.json");
    const HfLlamaConfig golden =
        parse_hf_llama_config_json(file_bytes(golden_path(std::string(name) + "/config.json")), "config.json");
    CHECK(model_args_json(gpt_config_of(back, 64, 128)) == model_args_json(gpt_config_of(golden, 64, 128)));
    CHECK_THAT(config, Contains("\"head_dim\": 16") && Contains("\"attention_bias\": false") &&
                           Contains("\"use_sliding_window\": false"));
    // Two tensor-parallel ranks (each normalising its own heads) export the same bytes.
    ConvertOptions reshard = convert("mgt", "mgt", dir + "/mgt", dir + "/tp2");
    reshard.target_tensor_parallel_size = 2;
    convert_checkpoint(reshard);
    convert_checkpoint(convert("mgt", "hf", dir + "/tp2", dir + "/hf2"));
    CHECK(file_bytes(dir + "/hf2/model.safetensors") == golden_weights);
  }
}

TEST_CASE("mgt models with query and key norms to Qwen3 and back are bit-exact", "[ckpt][hf][qwen3]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptConfig moe = qwen3_config();
  moe.num_layers = 3;
  moe.moe.num_experts = 4;
  moe.moe.topk = 2;
  moe.moe.ffn_hidden_size = 12;
  moe.moe.layer_pattern = {true, false, true};
  moe.moe.aux_loss_coeff = 0.01;
  for (const auto& [config, architecture] :
       {std::pair{qwen3_config(), "Qwen3ForCausalLM"}, std::pair{moe, "Qwen3MoeForCausalLM"}}) {
    INFO(architecture);
    const std::string dir = test::scratch_dir(std::string("hf_qwen3_mgt_round_trip_") + architecture);
    auto original = hf_testing::save_random_model(config, backend, dir + "/mgt", 29, R"({"eod": 2, "bos": 1})");
    // No record of an architecture: query and key norms are written as Qwen3.
    const ConvertResult exported = convert_checkpoint(convert("mgt", "hf", dir + "/mgt", dir + "/hf"));
    CHECK(exported.parameters == config.num_parameters());
    CHECK_THAT(file_bytes(dir + "/hf/config.json"), Contains(architecture) && Contains("\"head_dim\": 6"));
    GptConfig expected = config;
    expected.hidden_dropout = 0.0;
    check_reimport(*original, expected, dir + "/hf", dir + "/back", backend);
  }
}

TEST_CASE("Qwen3 refusals name the config field or flag", "[ckpt][hf][qwen3]") {
  const std::string dir = test::scratch_dir("hf_qwen3_refusals");
  CHECK_THAT(refusal(edited_golden(dir, kDenseDir, "attention_bias", "true")),
             Contains("config.json") && Contains("attention_bias is true"));
  // A window (transformers applies one only with use_sliding_window) shorter than the positions.
  const std::string windowed = R"({"model_type": "qwen3", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 8,
      "num_hidden_layers": 2, "num_attention_heads": 2, "max_position_embeddings": 64, "sliding_window": 8)";
  CHECK_NOTHROW(parse_hf_llama_config_json(windowed + "}", "c.json"));
  CHECK_THROWS_WITH(parse_hf_llama_config_json(windowed + R"(, "use_sliding_window": true})", "c.json"),
                    Contains("c.json") && Contains("use_sliding_window is true with sliding_window 8"));
  CHECK_THAT(refusal(edited_golden(dir, kMoeDir, "decoder_sparse_step", "4")),
             Contains("decoder_sparse_step 4 and mlp_only_layers leave no sparse layer: mgt reads a Qwen3Moe model"));

  // Exports refuse what Qwen3 cannot express, before writing anything.
  GptConfig c = qwen3_config();
  c.qk_layernorm = false;
  CHECK_THAT(export_refusal(c, dir + "/no-norms", "qwen3"),
             Contains("cannot be expressed as Qwen3: no --qk-layernorm"));
  CHECK_THAT(export_refusal(qwen3_config(), dir + "/as-llama", "llama"),
             Contains("cannot be expressed as Llama: --qk-layernorm") && Contains("write it as qwen3"));
  c = qwen3_config();
  c.add_qkv_bias = true;
  CHECK_THAT(export_refusal(c, dir + "/biased"), Contains("cannot be expressed as Qwen3: biases on linear layers"));
  c = qwen3_config();
  c.moe.num_experts = 4;
  c.moe.topk = 2;
  c.moe.layer_pattern = {true, true};
  c.moe.shared_expert_intermediate_size = 8;
  CHECK_THAT(export_refusal(c, dir + "/shared"),
             Contains("cannot be expressed as Qwen3Moe: --moe-shared-expert-intermediate-size"));
  CHECK_THAT(export_refusal(qwen3_config(), dir + "/dense-as-moe", "qwen3_moe"),
             Contains("cannot be expressed as Qwen3Moe: a model without MoE layers"));
}

TEST_CASE("Qwen3 and Qwen3-MoE config.json defaults", "[ckpt][hf][qwen3]") {
  // Qwen3Config's head_dim is 128 whatever the hidden size; Qwen3MoeConfig has none, so the
  // model takes hidden size / heads.
  const HfLlamaConfig dense = parse_hf_llama_config_json(
      R"({"model_type": "qwen3", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 8,
          "num_hidden_layers": 2, "num_attention_heads": 2})", "c.json");
  CHECK(dense.head_dim == 128);
  CHECK(dense.max_position_embeddings == 32768);
  CHECK_FALSE(dense.tie_word_embeddings);
  const HfLlamaConfig sparse = parse_hf_llama_config_json(
      R"({"model_type": "qwen3_moe", "vocab_size": 32, "hidden_size": 16, "intermediate_size": 8,
          "num_hidden_layers": 2, "num_attention_heads": 2})", "c.json");
  CHECK(sparse.head_dim == 8);
  CHECK(sparse.num_local_experts == 128);
  CHECK(sparse.num_experts_per_tok == 8);
  CHECK(sparse.moe_intermediate_size == 768);
  CHECK_FALSE(sparse.norm_topk_prob);
  const GptConfig c = gpt_config_of(sparse, 16, 32);
  CHECK(c.qk_layernorm);
  CHECK(c.moe.pre_softmax);
  CHECK_FALSE(c.moe.shared_expert_gate);
  CHECK_FALSE(c.add_qkv_bias);
}
