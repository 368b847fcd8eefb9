#include "model/gpt_config.hpp"

#include <string>

#include "core/checked_size.hpp"
#include "core/error.hpp"

namespace mgt {
namespace {

std::string str(int64_t value) { return std::to_string(value); }

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError("model configuration: " + message);
}

void require_positive(int64_t value, const char* flag) {
  require(value > 0, std::string(flag) + " must be > 0 (got " + str(value) + ")");
}

void require_probability(double p, const char* flag) {
  require(p >= 0.0 && p < 1.0,
          std::string(flag) + " must be in [0, 1) (got " + std::to_string(p) + ")");
}

}  // namespace

std::string_view to_string(PositionEmbeddingType type) {
  switch (type) {
    case PositionEmbeddingType::kLearnedAbsolute:
      return "learned_absolute";
    case PositionEmbeddingType::kRope:
      return "rope";
    case PositionEmbeddingType::kNone:
      return "none";
  }
  return "?";
}

std::string_view to_string(Normalization norm) {
  return norm == Normalization::kLayerNorm ? "LayerNorm" : "RMSNorm";
}

Activation mlp_activation(bool swiglu, bool squared_relu, bool openai_gelu, bool bias_gelu_fusion,
                          bool add_bias_linear) {
  if (swiglu) return Activation::kSwiglu;
  if (squared_relu) return Activation::kSquaredRelu;
  return openai_gelu || (bias_gelu_fusion && add_bias_linear) ? Activation::kOpenaiGelu : Activation::kGelu;
}

std::string_view to_string(Activation activation) {
  switch (activation) {
    case Activation::kGelu:
      return "gelu";
    case Activation::kOpenaiGelu:
      return "openai_gelu";
    case Activation::kSwiglu:
      return "swiglu";
    case Activation::kSquaredRelu:
      return "squared_relu";
  }
  return "?";
}

std::string_view to_string(RecomputeGranularity granularity) {
  switch (granularity) {
    case RecomputeGranularity::kNone:
      return "none";
    case RecomputeGranularity::kSelective:
      return "selective";
    case RecomputeGranularity::kFull:
      return "full";
  }
  return "?";
}

std::string_view to_string(RecomputeMethod method) {
  return method == RecomputeMethod::kBlock ? "block" : "uniform";
}

PositionEmbeddingType parse_position_embedding_type(std::string_view text) {
  for (auto type : {PositionEmbeddingType::kLearnedAbsolute, PositionEmbeddingType::kRope,
                    PositionEmbeddingType::kNone}) {
    if (text == to_string(type)) return type;
  }
  throw UsageError("--position-embedding-type: unsupported value '" + std::string(text) +
                   "' (choose learned_absolute, rope or none)");
}

Normalization parse_normalization(std::string_view text) {
  for (auto norm : {Normalization::kLayerNorm, Normalization::kRmsNorm}) {
    if (text == to_string(norm)) return norm;
  }
  throw UsageError("--normalization: unsupported value '" + std::string(text) +
                   "' (choose LayerNorm or RMSNorm)");
}

RecomputeGranularity parse_recompute_granularity(std::string_view text) {
  for (auto g : {RecomputeGranularity::kNone, RecomputeGranularity::kSelective,
                 RecomputeGranularity::kFull}) {
    if (text == to_string(g)) return g;
  }
  throw UsageError("--recompute-granularity: unsupported value '" + std::string(text) +
                   "' (choose full or selective)");
}

RecomputeMethod parse_recompute_method(std::string_view text) {
  for (auto m : {RecomputeMethod::kUniform, RecomputeMethod::kBlock}) {
    if (text == to_string(m)) return m;
  }
  throw UsageError("--recompute-method: unsupported value '" + std::string(text) + "' (choose uniform or block)");
}

int64_t GptConfig::fc1_size() const {
  return gated_linear_unit() ? 2 * ffn_hidden_size : ffn_hidden_size;
}

int64_t GptConfig::rotary_dim() const {
  // Megatron's int(kv_channels · rotary_percent), truncating like Python's int().
  return static_cast<int64_t>(static_cast<double>(kv_channels) * rotary_percent);
}

GptConfig GptConfig::resolved() const {
  GptConfig c = *this;
  require_positive(c.num_layers, "--num-layers");
  require_positive(c.hidden_size, "--hidden-size");
  require_positive(c.num_attention_heads, "--num-attention-heads");

  if (c.kv_channels == 0) {
    require(c.hidden_size % c.num_attention_heads == 0,
            "--hidden-size (" + str(c.hidden_size) + ") must be divisible by " +
                "--num-attention-heads (" + str(c.num_attention_heads) +
                ") unless --kv-channels is given");
    c.kv_channels = c.hidden_size / c.num_attention_heads;
  }
  require_positive(c.kv_channels, "--kv-channels");

  if (c.group_query_attention) {
    require_positive(c.num_query_groups, "--num-query-groups");
    require(c.num_attention_heads % c.num_query_groups == 0,
            "--num-attention-heads (" + str(c.num_attention_heads) +
                ") must be divisible by --num-query-groups (" + str(c.num_query_groups) + ")");
  }

  if (c.ffn_hidden_size == 0) {
    // SwiGLU has two input projections, so Megatron shrinks f to keep the parameter count near
    // the 4h MLP's, rounded down to a multiple of 64.
    c.ffn_hidden_size =
        c.gated_linear_unit()
            ? static_cast<int64_t>(4.0 * static_cast<double>(c.hidden_size) * 2.0 / 3.0 / 64.0) * 64
            : (CheckedSize(4) * c.hidden_size).value();
    require(c.ffn_hidden_size > 0, "the default SwiGLU --ffn-hidden-size int(4·" +
                                       str(c.hidden_size) +
                                       "·2/3/64)·64 is 0; give --ffn-hidden-size explicitly");
  }
  require_positive(c.ffn_hidden_size, "--ffn-hidden-size");

  if (c.recompute_granularity == RecomputeGranularity::kFull)
    require_positive(c.recompute_num_layers, "--recompute-num-layers");

  require_positive(c.seq_length, "--seq-length");
  if (c.max_position_embeddings == 0) c.max_position_embeddings = c.seq_length;
  if (c.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute) {
    require(c.max_position_embeddings >= c.seq_length,
            "--max-position-embeddings (" + str(c.max_position_embeddings) +
                ") must be >= --seq-length (" + str(c.seq_length) + ")");
  }
  if (c.position_embedding_type == PositionEmbeddingType::kRope) {
    require(c.rotary_percent > 0.0 && c.rotary_percent <= 1.0,
            "--rotary-percent must be in (0, 1] (got " + std::to_string(c.rotary_percent) + ")");
    require(c.rotary_base > 0.0, "--rotary-base must be > 0");
    require(c.rope_scaling_factor > 0.0, "--rope-scaling-factor must be > 0");
    const int64_t dim = c.rotary_dim();
    require(dim > 0 && dim % 2 == 0,
            "RoPE rotates int(--kv-channels · --rotary-percent) = " + str(dim) +
                " channels per head, which must be even and > 0");
  }

  require(c.norm_epsilon > 0.0, "--norm-epsilon must be > 0");
  require_probability(c.hidden_dropout, "--hidden-dropout");
  require_probability(c.attention_dropout, "--attention-dropout");
  require(c.init_method_std > 0.0, "--init-method-std must be > 0");
  require_positive(c.padded_vocab_size, "padded vocabulary size");
  if (c.moe.enabled()) {
    // Megatron's TransformerConfig: the experts' size defaults to --ffn-hidden-size.
    if (c.moe.ffn_hidden_size == 0) c.moe.ffn_hidden_size = c.ffn_hidden_size;
    require_positive(c.moe.ffn_hidden_size, "--moe-ffn-hidden-size");
    require(static_cast<int64_t>(c.moe.layer_pattern.size()) == c.num_layers,
            "--moe-layer-freq names " + str(static_cast<int64_t>(c.moe.layer_pattern.size())) + " layers, not " +
                str(c.num_layers));
    require(c.moe.topk >= 1 && c.moe.topk <= c.moe.num_experts, "--moe-router-topk must be in [1, --num-experts]");
    require(!c.add_bias_linear, "--num-experts needs --disable-bias-linear (Megatron: bias is not supported for MoE)");
    require(!c.moe.shared_expert_gate || c.moe.shared_expert_intermediate_size > 0,
            "--moe-shared-expert-gate needs --moe-shared-expert-intermediate-size");
  }
  return c;
}

int64_t GptConfig::num_parameters() const {
  // Checked arithmetic: the dimensions come from users, and a count that wrapped around would
  // let a model far too large pass for a small one.
  const GptConfig c = resolved();
  using N = CheckedSize;
  const N h = c.hidden_size;
  const N bias = c.add_bias_linear ? 1 : 0;
  const N norm = c.normalization == Normalization::kLayerNorm ? h * 2 : h;
  const N attention_width = N(c.num_attention_heads) * c.kv_channels;
  const N qkv = (N(c.num_attention_heads) + N(2) * c.query_groups()) * c.kv_channels;
  const N fc1 = c.gated_linear_unit() ? N(2) * c.ffn_hidden_size : N(c.ffn_hidden_size);

  const N layer = norm                            // input_layernorm
                  + qkv * h + N(c.qkv_has_bias() ? 1 : 0) * qkv  // linear_qkv
                  + c.qk_norm_parameters()          // q_layernorm, k_layernorm
                  + h * attention_width + bias * h  // linear_proj
                  + norm;                         // pre_mlp_layernorm
  const N mlp = fc1 * h + bias * fc1                // linear_fc1
                + h * c.ffn_hidden_size + bias * h;  // linear_fc2
  // An MoE layer's MLP: the router, the experts and the shared experts instead of linear_fc1/fc2.
  const N gated = c.gated_linear_unit() ? 2 : 1;
  const N moe_mlp = N(c.moe.num_experts) * h +
                    N(c.moe.num_experts) * (gated * c.moe.ffn_hidden_size * h + h * c.moe.ffn_hidden_size) +
                    gated * c.moe.shared_expert_intermediate_size * h + h * c.moe.shared_expert_intermediate_size +
                    N(c.moe.shared_expert_gate ? 1 : 0) * h;
  const int64_t moe_layers = c.moe.num_moe_layers();
  N total = N(c.padded_vocab_size) * h + N(c.num_layers) * layer + N(c.num_layers - moe_layers) * mlp +
            N(moe_layers) * moe_mlp + norm;
  if (c.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute) total += N(c.max_position_embeddings) * h;
  if (c.untie_embeddings_and_output_weights) total += N(c.padded_vocab_size) * h;
  return total.value();
}

double GptConfig::num_floating_point_operations(int64_t global_batch_size) const {
  const GptConfig c = resolved();
  const double batch = static_cast<double>(global_batch_size);
  const double s = static_cast<double>(c.seq_length);
  const double layers = static_cast<double>(c.num_layers);
  const double h = static_cast<double>(c.hidden_size);
  const double f = static_cast<double>(c.ffn_hidden_size);
  const double n = static_cast<double>(c.num_attention_heads);
  const double g = static_cast<double>(c.query_groups());
  const double k = static_cast<double>(c.kv_channels);
  const double vocab = static_cast<double>(c.padded_vocab_size);
  const double gated = c.gated_linear_unit() ? 1.5 : 1.0;

  // Megatron's count for MoE layers: each token runs topk experts of --moe-ffn-hidden-size and
  // the shared experts (megatron/training/training.py num_floating_point_operations).
  const double moe_layers = static_cast<double>(c.moe.num_moe_layers());
  const double moe_f = static_cast<double>(c.moe.ffn_hidden_size) * static_cast<double>(c.moe.topk) +
                       static_cast<double>(c.moe.shared_expert_intermediate_size);
  const double mlp = 12.0 * h * gated * ((layers - moe_layers) * f + moe_layers * moe_f);
  const double attention = 12.0 * layers * h * h * (1.0 + g / n + s / (2.0 * h)) * (k * n / h);
  const double logits = 6.0 * h * vocab;
  return batch * s * (mlp + attention + logits);
}

}  // namespace mgt
