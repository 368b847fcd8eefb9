#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "model/gpt_config.hpp"
#include "model/parameter_init.hpp"
#include "model/parameter_table.hpp"
#include "model_testing.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace mgt;

namespace {

// GPT-2 small (124M) as Megatron trains it: 50257 tokens padded to 50304.
GptConfig gpt2_small() {
  GptConfig c;
  c.num_layers = 12;
  c.hidden_size = 768;
  c.num_attention_heads = 12;
  c.seq_length = 1024;
  c.max_position_embeddings = 1024;
  c.padded_vocab_size = padded_vocab_size(50257, 128, 1);
  return c;
}

std::string usage_message(const GptConfig& c) {
  try {
    (void)c.resolved();
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitUsage);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("GptConfig derives Megatron's defaults", "[model]") {
  GptConfig c = gpt2_small();
  const GptConfig r = c.resolved();
  CHECK(r.padded_vocab_size == 50304);
  CHECK(r.kv_channels == 64);
  CHECK(r.ffn_hidden_size == 3072);
  CHECK(r.query_groups() == 12);
  CHECK(r.qkv_size() == 3 * 768);
  CHECK(r.resolved().ffn_hidden_size == 3072);  // idempotent

  c.activation = Activation::kSwiglu;
  // int(4·768·2/3 / 64)·64 = int(32)·64
  CHECK(c.resolved().ffn_hidden_size == 2048);
  CHECK(c.resolved().fc1_size() == 4096);
  c.hidden_size = 4096;
  c.num_attention_heads = 32;
  // LLaMA-7B-like: int(10922.67 / 64)·64 = 170·64
  CHECK(c.resolved().ffn_hidden_size == 10880);

  GptConfig rope = gpt2_small();
  rope.position_embedding_type = PositionEmbeddingType::kRope;
  rope.rotary_percent = 0.5;
  CHECK(rope.resolved().rotary_dim() == 32);

  GptConfig no_max = gpt2_small();
  no_max.max_position_embeddings = 0;
  CHECK(no_max.resolved().max_position_embeddings == 1024);
}

TEST_CASE("GptConfig validation names the offending flags", "[model]") {
  GptConfig c = gpt2_small();
  c.group_query_attention = true;
  c.num_query_groups = 5;
  CHECK_THAT(usage_message(c), Catch::Contains("--num-attention-heads (12) must be divisible by "
                                               "--num-query-groups (5)"));

  c = gpt2_small();
  c.num_attention_heads = 7;
  CHECK_THAT(usage_message(c), Catch::Contains("--hidden-size (768) must be divisible by "
                                               "--num-attention-heads (7)"));
  c.kv_channels = 64;  // an explicit head size lifts the restriction
  CHECK(usage_message(c).empty());

  c = gpt2_small();
  c.max_position_embeddings = 512;
  CHECK_THAT(usage_message(c), Catch::Contains("--max-position-embeddings (512) must be >= "
                                               "--seq-length (1024)"));
  c.position_embedding_type = PositionEmbeddingType::kRope;  // no table to index: fine
  CHECK(usage_message(c).empty());

  c = gpt2_small();
  c.hidden_size = 16;
  c.num_attention_heads = 2;
  c.activation = Activation::kSwiglu;
  CHECK_THAT(usage_message(c), Catch::Contains("give --ffn-hidden-size explicitly"));

  c = gpt2_small();
  c.position_embedding_type = PositionEmbeddingType::kRope;
  c.rotary_percent = 0.3;  // int(64·0.3) = 19 channels: odd
  CHECK_THAT(usage_message(c), Catch::Contains("must be even"));

  c = gpt2_small();
  c.hidden_dropout = 1.0;
  CHECK_THAT(usage_message(c), Catch::Contains("--hidden-dropout must be in [0, 1)"));
  c = gpt2_small();
  c.padded_vocab_size = 0;
  CHECK_THAT(usage_message(c), Catch::Contains("padded vocabulary size must be > 0"));

  CHECK_THROWS_WITH(validate_tensor_parallel(gpt2_small(), {8, 0}),
                    Catch::Contains("--num-attention-heads (12) must be divisible by "
                                    "--tensor-model-parallel-size (8)"));
  CHECK(parse_normalization("RMSNorm") == Normalization::kRmsNorm);
  CHECK_THROWS_WITH(parse_position_embedding_type("alibi"),
                    Catch::Contains("choose learned_absolute, rope or none"));
}

TEST_CASE("GPT-2 124M parameter count and FLOPs by hand", "[model]") {
  // Parameters: wte 50304·768 = 38,633,472; wpe 1024·768 = 786,432; per layer
  // 2·(768+768) norms + 2304·768+2304 qkv + 768·768+768 proj + 3072·768+3072 fc1
  // + 768·3072+768 fc2 = 7,087,872; final norm 1,536.
  // 38,633,472 + 786,432 + 12·7,087,872 + 1,536 = 124,475,904.
  CHECK(gpt2_small().num_parameters() == 124475904);

  // FLOPs per token (B = 1, s = 1024):
  //   MLP        12·L·h·f       = 12·12·768·3072              = 339,738,624
  //   attention  12·L·h²·(1 + 1 + 1024/1536)·1                 = 226,492,416
  //   logits     6·h·V          = 6·768·50304                  = 231,800,832
  // total 798,031,872 per token · 1024 tokens · 8 sequences = 6,537,477,095,424.
  CHECK(gpt2_small().num_floating_point_operations(8) == Approx(6537477095424.0).epsilon(1e-12));

  // GQA + SwiGLU: L=2, h=64, n=4, g=2, k=16, f=128, V=256, s=32, B=3:
  //   MLP 12·2·64·128·1.5 = 294,912; attention 12·2·64²·(1 + 0.5 + 0.25)·1 = 172,032;
  //   logits 6·64·256 = 98,304; (294,912 + 172,032 + 98,304)·32·3 = 54,263,808.
  GptConfig c;
  c.num_layers = 2;
  c.hidden_size = 64;
  c.num_attention_heads = 4;
  c.group_query_attention = true;
  c.num_query_groups = 2;
  c.ffn_hidden_size = 128;
  c.activation = Activation::kSwiglu;
  c.padded_vocab_size = 256;
  c.seq_length = 32;
  CHECK(c.num_floating_point_operations(3) == Approx(54263808.0).epsilon(1e-12));
}

TEST_CASE("GPT parameter table: names, shapes, layout and count", "[model]") {
  const ParameterTable table = gpt_parameter_table(gpt2_small());
  REQUIRE(table.entries.size() == 2 + 12 * 12 + 2);
  const char* layer0[] = {
      "decoder.layers.0.input_layernorm.weight",
      "decoder.layers.0.input_layernorm.bias",
      "decoder.layers.0.self_attention.linear_qkv.weight",
      "decoder.layers.0.self_attention.linear_qkv.bias",
      "decoder.layers.0.self_attention.linear_proj.weight",
      "decoder.layers.0.self_attention.linear_proj.bias",
      "decoder.layers.0.pre_mlp_layernorm.weight",
      "decoder.layers.0.pre_mlp_layernorm.bias",
      "decoder.layers.0.mlp.linear_fc1.weight",
      "decoder.layers.0.mlp.linear_fc1.bias",
      "decoder.layers.0.mlp.linear_fc2.weight",
      "decoder.layers.0.mlp.linear_fc2.bias",
  };
  CHECK(table.entries[0].name == "embedding.word_embeddings.weight");
  CHECK(table.entries[1].name == "embedding.position_embeddings.weight");
  for (size_t i = 0; i < 12; ++i) CHECK(table.entries[2 + i].name == layer0[i]);
  CHECK(table.entries[table.entries.size() - 2].name == "decoder.final_layernorm.weight");
  CHECK(table.entries.back().name == "decoder.final_layernorm.bias");
  CHECK(table.find("output_layer.weight") == nullptr);  // tied

  CHECK(table.at("embedding.word_embeddings.weight").global_shape ==
        std::vector<int64_t>{50304, 768});
  CHECK(table.at("decoder.layers.3.self_attention.linear_qkv.weight").global_shape ==
        std::vector<int64_t>{2304, 768});
  CHECK(table.at("decoder.layers.3.self_attention.linear_proj.weight").global_shape ==
        std::vector<int64_t>{768, 768});
  CHECK(table.at("decoder.layers.11.mlp.linear_fc2.weight").global_shape ==
        std::vector<int64_t>{768, 3072});

  int64_t total = 0;
  int64_t end = 0;
  for (const ParameterEntry& e : table.entries) {
    total += e.numel();
    CHECK(e.offset % kParameterAlignment == 0);
    CHECK(e.offset >= end);  // no overlap
    end = e.offset + e.numel();
    CHECK(e.local_shape == e.global_shape);  // TP = 1
    // Megatron's no-decay rule.
    CHECK(e.weight_decay == (e.global_shape.size() == 2));
  }
  CHECK(total == gpt2_small().num_parameters());
  CHECK(table.buffer_size >= end);

  const auto& qkv = table.at("decoder.layers.0.self_attention.linear_qkv.weight");
  CHECK(qkv.partition_dim == 0);
  CHECK(qkv.init == ParameterInit::kNormal);
  CHECK(qkv.init_std == 0.02);
  const auto& proj = table.at("decoder.layers.0.self_attention.linear_proj.weight");
  CHECK(proj.partition_dim == 1);
  CHECK(proj.init_std == Approx(0.02 / std::sqrt(24.0)));
  CHECK(table.at("decoder.layers.0.mlp.linear_fc2.weight").init_std == proj.init_std);
  CHECK(table.at("decoder.layers.0.self_attention.linear_proj.bias").partition_dim ==
        kNotPartitioned);
  CHECK(table.at("decoder.layers.0.mlp.linear_fc1.bias").partition_dim == 0);
  CHECK(table.at("decoder.layers.0.input_layernorm.weight").init == ParameterInit::kOnes);
  CHECK(table.at("decoder.layers.0.mlp.linear_fc1.bias").init == ParameterInit::kZeros);
  CHECK(table.at("embedding.word_embeddings.weight").partition_dim == 0);
  CHECK(table.at("embedding.position_embeddings.weight").partition_dim == kNotPartitioned);
}

TEST_CASE("GPT parameter table of the untied RMSNorm model without biases", "[model]") {
  const GptConfig c = model_testing::llama_like_config();
  const ParameterTable table = gpt_parameter_table(c);
  CHECK(table.find("embedding.position_embeddings.weight") == nullptr);
  CHECK(table.find("decoder.layers.0.input_layernorm.bias") == nullptr);
  CHECK(table.find("decoder.layers.0.self_attention.linear_qkv.bias") == nullptr);
  CHECK(table.at("output_layer.weight").global_shape == std::vector<int64_t>{32, 16});
  // (4 + 2·2)·8 rows; proj reads 4·8 = 32 channels; fc1 = 2·24 (gate, up).
  CHECK(table.at("decoder.layers.1.self_attention.linear_qkv.weight").global_shape ==
        std::vector<int64_t>{64, 16});
  CHECK(table.at("decoder.layers.1.self_attention.linear_proj.weight").global_shape ==
        std::vector<int64_t>{16, 32});
  CHECK(table.at("decoder.layers.1.mlp.linear_fc1.weight").global_shape ==
        std::vector<int64_t>{48, 16});
  int64_t total = 0;
  for (const ParameterEntry& e : table.entries) total += e.numel();
  CHECK(total == c.num_parameters());
}

TEST_CASE("GPT initialisation does not depend on tensor-parallel sharding", "[model]") {
  GptConfig c = model_testing::llama_like_config();
  c.untie_embeddings_and_output_weights = false;
  c.add_bias_linear = true;
  c.init_method_xavier_uniform = GENERATE(false, true);
  const ParameterTable whole = gpt_parameter_table(c);
  const int64_t tp = 2;
  for (const ParameterEntry& full : whole.entries) {
    std::vector<float> want(static_cast<size_t>(full.numel()));
    initialize_parameter(full, {}, 99, want);
    std::vector<float> merged(want.size(), -1.0f);
    for (int64_t rank = 0; rank < tp; ++rank) {
      const ParameterTable shard_table = gpt_parameter_table(c, {tp, rank});
      const ParameterEntry& shard = shard_table.at(full.name);
      if (full.partition_dim != kNotPartitioned) {
        CHECK(shard.local_shape[static_cast<size_t>(full.partition_dim)] * tp ==
              full.global_shape[static_cast<size_t>(full.partition_dim)]);
      }
      std::vector<float> local(static_cast<size_t>(shard.numel()));
      initialize_parameter(shard, {tp, rank}, 99, local);
      // Filled in ranges cut at odd places (as threads fill them), the same values.
      std::vector<float> ranges(local.size(), -1.0f);
      for (int64_t first = 0; first < shard.numel(); first += 37) {
        const int64_t count = std::min<int64_t>(37, shard.numel() - first);
        initialize_parameter_range(shard, {tp, rank}, 99, first,
                                   std::span<float>(ranges).subspan(static_cast<size_t>(first), static_cast<size_t>(count)));
      }
      CHECK(ranges == local);
      for (int64_t i = 0; i < shard.numel(); ++i) {
        merged[static_cast<size_t>(shard.global_index(i, {tp, rank}))] =
            local[static_cast<size_t>(i)];
      }
    }
    INFO(full.name);
    CHECK(merged == want);
  }

  // The values have the requested spread.
  if (c.init_method_xavier_uniform) return;
  const ParameterEntry& w = whole.at("embedding.word_embeddings.weight");
  std::vector<float> values(static_cast<size_t>(w.numel()));
  initialize_parameter(w, {}, 5, values);
  double sum2 = 0.0;
  for (const float v : values) sum2 += static_cast<double>(v) * v;
  CHECK(std::sqrt(sum2 / static_cast<double>(values.size())) == Approx(0.02).epsilon(0.15));
}

TEST_CASE("GPT initialisation with --init-method-xavier-uniform draws each weight from U(-a, a) of its whole shape", "[model]") {
  GptConfig c = model_testing::llama_like_config();
  c.init_method_xavier_uniform = true;
  const ParameterTable table = gpt_parameter_table(c);
  for (const ParameterEntry& e : table.entries) {
    INFO(e.name);
    if (e.global_shape.size() != 2) {
      CHECK(e.init != ParameterInit::kUniform);  // norms stay ones, biases zeros
      continue;
    }
    CHECK(e.init == ParameterInit::kUniform);
    const double a = std::sqrt(6.0 / static_cast<double>(e.global_shape[0] + e.global_shape[1]));
    CHECK(e.init_std == Approx(a).epsilon(1e-15));  // no depth scaling of the output projections
    std::vector<float> values(static_cast<size_t>(e.numel()));
    initialize_parameter(e, {}, 7, values);
    double sum2 = 0.0;
    float largest = 0.0f;
    for (const float v : values) {
      sum2 += static_cast<double>(v) * v;
      largest = std::max(largest, std::abs(v));
    }
    CHECK(largest < a);
    CHECK(largest > 0.9 * a);
    CHECK(sum2 / static_cast<double>(values.size()) == Approx(a * a / 3.0).epsilon(0.1));
  }
}

TEST_CASE("standard_normal has unit variance and depends on seed and stream", "[model]") {
  double sum = 0.0;
  double sum2 = 0.0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double z = standard_normal(1, 2, static_cast<uint64_t>(i));
    sum += z;
    sum2 += z * z;
  }
  CHECK(std::abs(sum / n) < 0.03);
  CHECK(sum2 / n == Approx(1.0).epsilon(0.03));
  CHECK(standard_normal(1, 2, 7) != standard_normal(2, 2, 7));
  CHECK(standard_normal(1, 2, 7) != standard_normal(1, 3, 7));
  CHECK(parameter_stream("a.weight") != parameter_stream("a.bias"));
}

TEST_CASE("GELU form follows Megatron's fused bias-GELU", "[model]") {
  // swiglu, squared_relu, openai_gelu, bias_gelu_fusion, add_bias_linear
  CHECK(mlp_activation(false, false, false, true, true) == Activation::kOpenaiGelu);  // Megatron's default
  CHECK(mlp_activation(false, false, false, false, true) == Activation::kGelu);       // --no-bias-gelu-fusion
  CHECK(mlp_activation(false, false, false, true, false) == Activation::kGelu);       // --disable-bias-linear
  CHECK(mlp_activation(false, false, true, false, false) == Activation::kOpenaiGelu);
  CHECK(mlp_activation(true, false, false, true, true) == Activation::kSwiglu);
  CHECK(mlp_activation(false, true, false, true, true) == Activation::kSquaredRelu);   // --squared-relu
  CHECK(mlp_activation(false, true, true, false, false) == Activation::kSquaredRelu);  // over --openai-gelu
}
