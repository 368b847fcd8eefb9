// The model-shape flags of Megatron's pretraining parser as mgt-train reads them, and as mgt-eval
// and mgt-generate read the ones a command line repeats to check them against the checkpoint.
// Their definitions (names, defaults, descriptions) are in model/model_flags.hpp.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mgt {

struct ModelShapeOptions {
  std::optional<std::int64_t> num_layers;            // --num-layers (required)
  std::optional<std::int64_t> hidden_size;           // --hidden-size (required)
  std::optional<std::int64_t> num_attention_heads;   // --num-attention-heads (required)
  std::optional<std::int64_t> ffn_hidden_size;       // --ffn-hidden-size: 4h, or int(8h/3/64)*64 with SwiGLU
  std::optional<std::int64_t> kv_channels;           // --kv-channels: h / heads
  bool group_query_attention = false;                // --group-query-attention
  std::int64_t num_query_groups = 1;                 // --num-query-groups (used with GQA only)
  std::optional<std::int64_t> seq_length;            // --seq-length (required)
  std::optional<std::int64_t> max_position_embeddings;  // --max-position-embeddings (required)
  std::string position_embedding_type = "learned_absolute";  // learned_absolute | rope | none
  // --no-position-embedding clears it: Megatron's deprecated switch, accepted only with rope,
  // whose model has no learned position table anyway.
  bool add_position_embedding = true;
  // --use-rotary-position-embeddings: Megatron's deprecated switch for --position-embedding-type
  // rope, which it sets whatever that flag says (validate_args).
  bool use_rotary_position_embeddings = false;
  double rotary_percent = 1.0;                       // --rotary-percent
  std::int64_t rotary_base = 10000;                  // --rotary-base
  bool use_rope_scaling = false;                     // --use-rope-scaling: Llama 3.1's frequency scaling
  double rope_scaling_factor = 8.0;                  // --rope-scaling-factor
  std::string normalization = "LayerNorm";           // LayerNorm | RMSNorm
  double norm_epsilon = 1e-5;                        // --norm-epsilon
  bool apply_layernorm_1p = false;                   // --apply-layernorm-1p: weights zero-centred, 1 + w applied
  bool qk_layernorm = false;                         // --qk-layernorm: each query and key head normalised
  bool swiglu = false;                               // --swiglu
  bool squared_relu = false;                         // --squared-relu
  bool openai_gelu = false;                          // --openai-gelu
  // Megatron's fused bias-GELU, on unless --no-bias-gelu-fusion: the tanh approximation of GELU
  // wherever the linears have biases (Megatron turns the fusion off without them).
  bool bias_gelu_fusion = true;
  bool add_bias_linear = true;                       // --disable-bias-linear clears it
  bool add_qkv_bias = false;                         // --add-qkv-bias
  bool untie_embeddings_and_output_weights = false;  // --untie-embeddings-and-output-weights
  double hidden_dropout = 0.1;                       // --hidden-dropout
  double attention_dropout = 0.1;                    // --attention-dropout
  double init_method_std = 0.02;                     // --init-method-std
  bool init_method_xavier_uniform = false;           // --init-method-xavier-uniform
  std::int64_t make_vocab_size_divisible_by = 128;   // --make-vocab-size-divisible-by
  // Recomputation trades compute for activation memory; results do not change.
  bool recompute_activations = false;                // --recompute-activations: granularity selective
  std::optional<std::string> recompute_granularity;  // full | selective
  std::optional<std::string> recompute_method;       // uniform | block
  std::optional<std::int64_t> recompute_num_layers;  // --recompute-num-layers
  // --recompute-modules (with selective granularity); unset: Megatron's default, core_attn.
  std::optional<std::vector<std::string>> recompute_modules;

  // Megatron's num_query_groups as the model sees it: the flag with GQA, else one group per head.
  std::int64_t query_groups() const {
    return group_query_attention ? num_query_groups : num_attention_heads.value_or(0);
  }
};

}  // namespace mgt
