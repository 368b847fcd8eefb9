// The GPT model configuration with Megatron's flag names, defaults and derived values
// (megatron/training/arguments.py, megatron/core/transformer/transformer_config.py).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/fp8_recipe.hpp"
#include "model/moe_config.hpp"

namespace mgt {

// --position-embedding-type
enum class PositionEmbeddingType { kLearnedAbsolute, kRope, kNone };
// --normalization
enum class Normalization { kLayerNorm, kRmsNorm };
// kGelu: the exact erf form (torch's F.gelu); kOpenaiGelu: the tanh approximation (OpenAI's
// GPT-2, and Megatron's fused bias-GELU); kSwiglu: --swiglu; kSquaredRelu: --squared-relu,
// relu(x)² (megatron/training/activations.py squared_relu; Nemotron-4's MLP).
enum class Activation { kGelu, kOpenaiGelu, kSwiglu, kSquaredRelu };
// Megatron's choice (core_transformer_config_from_args): SwiGLU or the squared ReLU if asked for
// (not both: validation refuses that); otherwise the tanh form under --openai-gelu or under the
// fused bias-GELU (--bias-gelu-fusion, on by default, and only with biased linears); the erf form
// otherwise.
Activation mlp_activation(bool swiglu, bool squared_relu, bool openai_gelu, bool bias_gelu_fusion,
                          bool add_bias_linear);
// --recompute-granularity: full keeps only the inputs of checkpointed layers and recomputes them
// in the backward (which layers: RecomputeMethod, model/recompute_plan.hpp); selective recomputes
// only the core attention (softmax·V).
enum class RecomputeGranularity { kNone, kSelective, kFull };
// --recompute-method under full granularity (megatron/core/transformer/transformer_block.py
// _checkpointed_forward): uniform checkpoints groups of --recompute-num-layers layers, block the
// first --recompute-num-layers layers of each pipeline stage, one by one.
enum class RecomputeMethod { kUniform, kBlock };

std::string_view to_string(PositionEmbeddingType type);  // "learned_absolute" | "rope" | "none"
std::string_view to_string(Normalization norm);          // "LayerNorm" | "RMSNorm"
std::string_view to_string(Activation activation);  // "gelu" | "openai_gelu" | "swiglu" | "squared_relu"
std::string_view to_string(RecomputeGranularity granularity);  // "none" | "selective" | "full"
std::string_view to_string(RecomputeMethod method);            // "uniform" | "block"
// The inverses, throwing a UsageError that lists the accepted values.
PositionEmbeddingType parse_position_embedding_type(std::string_view text);
Normalization parse_normalization(std::string_view text);
RecomputeGranularity parse_recompute_granularity(std::string_view text);
RecomputeMethod parse_recompute_method(std::string_view text);

struct GptConfig {
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t num_attention_heads = 0;
  // Without --group-query-attention every head has its own key/value (groups = heads).
  bool group_query_attention = false;
  int64_t num_query_groups = 1;
  int64_t kv_channels = 0;      // 0: hidden_size / num_attention_heads
  int64_t ffn_hidden_size = 0;  // 0: 4·hidden, or int(4·hidden·2/3 / 64)·64 with SwiGLU
  int64_t seq_length = 0;
  int64_t max_position_embeddings = 0;  // 0: seq_length
  PositionEmbeddingType position_embedding_type = PositionEmbeddingType::kLearnedAbsolute;
  double rotary_percent = 1.0;
  double rotary_base = 10000.0;
  // --use-rope-scaling: Llama 3.1's scaling of the rotary frequencies by --rope-scaling-factor
  // (kernels/operation_params.hpp llama3_scaled_inv_freq).
  bool use_rope_scaling = false;
  double rope_scaling_factor = 8.0;
  Normalization normalization = Normalization::kLayerNorm;
  // --apply-layernorm-1p: norm weights stored zero-centred (initialised to 0), applied as 1 + w
  // (Megatron's TransformerConfig.layernorm_zero_centered_gamma).
  bool layernorm_zero_centered_gamma = false;
  // --qk-layernorm: Megatron's q_layernorm and k_layernorm (megatron/core/transformer/attention.py),
  // a norm of --normalization over each query and key head (kv_channels wide) between the QKV
  // projection and RoPE.
  bool qk_layernorm = false;
  // The parameters of one layer's query and key norms: one head wide each, with LayerNorm's bias.
  int64_t qk_norm_parameters() const {
    return qk_layernorm ? 2 * (normalization == Normalization::kLayerNorm ? 2 : 1) * kv_channels : 0;
  }
  double norm_epsilon = 1e-5;
  Activation activation = Activation::kGelu;
  bool add_bias_linear = true;  // --disable-bias-linear clears it
  // --add-qkv-bias: linear_qkv has a bias even without add_bias_linear (Megatron's attention.py
  // builds linear_qkv with bias=add_bias_linear or add_qkv_bias).
  bool add_qkv_bias = false;
  bool qkv_has_bias() const { return add_bias_linear || add_qkv_bias; }
  bool untie_embeddings_and_output_weights = false;
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  double init_method_std = 0.02;
  // --init-method-xavier-uniform: weights from U(±sqrt(6 / (fan_in + fan_out))) instead of normals.
  bool init_method_xavier_uniform = false;
  int64_t padded_vocab_size = 0;  // see padded_vocab_size() in tokenizer/tokenizer.hpp
  RecomputeGranularity recompute_granularity = RecomputeGranularity::kNone;
  // FP8 training of the transformer layers' linears (--fp8-format); none: bf16/fp16/fp32 only.
  std::optional<Fp8Recipe> fp8;
  RecomputeMethod recompute_method = RecomputeMethod::kUniform;  // with kFull
  int64_t recompute_num_layers = 1;                              // with kFull
  // With kSelective: --recompute-modules holds core_attn (Megatron's default). Without it,
  // selective granularity recomputes nothing (Megatron's empty --recompute-modules).
  bool recompute_core_attention = true;
  // With kSelective, --recompute-modules layernorm: the two norms' outputs discarded after use and
  // recomputed before the backward reads them; mlp: the dense MLP's fc1 and activation outputs
  // likewise, rebuilt by rerunning the MLP's forward (megatron/core/transformer/transformer_layer.py).
  bool recompute_layernorm = false;
  bool recompute_mlp = false;
  // With kSelective, --recompute-modules moe_act: the MoE experts' activation outputs discarded
  // and recomputed from their kept fc1 outputs before the experts' backward.
  bool recompute_moe_act = false;
  // With kSelective, --recompute-modules moe (or --moe-layer-recompute): each MoE layer's
  // activations discarded and rebuilt by rerunning the layer (router, dispatch, experts) from its
  // kept input before its backward (megatron/core/transformer/moe/moe_layer.py's checkpoint).
  bool recompute_moe = false;
  // Mixture of Experts (--num-experts and the --moe-* flags); dense when moe.num_experts is 0.
  MoeConfig moe;

  // A copy with every "0 = default" field filled in as Megatron derives it, validated; throws a
  // UsageError naming the offending flags. Idempotent.
  GptConfig resolved() const;

  // Derived sizes; meaningful on a resolved configuration.
  int64_t query_groups() const {
    return group_query_attention ? num_query_groups : num_attention_heads;
  }
  // Rows of the fused QKV projection: (heads + 2·groups)·kv_channels.
  int64_t qkv_size() const { return (num_attention_heads + 2 * query_groups()) * kv_channels; }
  // Output features of linear_fc1: ffn, or 2·ffn (gate and up halves) with SwiGLU.
  int64_t fc1_size() const;
  // Channels of each head that RoPE rotates: int(kv_channels · rotary_percent).
  int64_t rotary_dim() const;
  bool gated_linear_unit() const { return activation == Activation::kSwiglu; }

  // Number of parameters of the whole (unsharded) model, tied output counted once. Throws
  // mgt::Error when the count overflows 64 bits.
  int64_t num_parameters() const;

  // Megatron's num_floating_point_operations for one iteration of global_batch_size sequences
  // of seq_length tokens: forward and backward of every GEMM, causal attention counted at half.
  double num_floating_point_operations(int64_t global_batch_size) const;
};

}  // namespace mgt
