// The Llama architecture as Hugging Face's LlamaConfig, MistralConfig and MixtralConfig
// (config.json) describe it, and how it corresponds to mgt's GptConfig. Llama is Megatron's GPT
// with --position-embedding-type rope (rotate-half, the whole head), --normalization RMSNorm,
// --swiglu, --disable-bias-linear, optionally --group-query-attention and
// --untie-embeddings-and-output-weights (Megatron's tools/checkpoint/loader_llama_mistral.py sets
// the same arguments). Mistral is the same network; its sliding-window attention is accepted
// only when the window covers every position the model takes. Llama 3.1's rope scaling
// (rope_type "llama3") is Megatron's --use-rope-scaling. Mixtral is Mistral with a mixture of
// experts in every layer's place of the MLP (tools/checkpoint/loader_mixtral_hf.py):
// --num-experts num_local_experts, --moe-router-topk num_experts_per_tok, each expert's
// intermediate_size as --moe-ffn-hidden-size, and Megatron's default routing, whose softmax over
// the chosen experts' logits (megatron/core/transformer/moe/moe_utils.py
// topk_softmax_with_capacity, without --moe-router-pre-softmax) equals Mixtral's softmax over all
// experts renormalised over the top k (MixtralSparseMoeBlock). What mgt does not compute (another
// rope_scaling type, another activation, biases on only some linear layers, router jitter) is
// refused, naming the field.
// Qwen2-MoE (Qwen2MoeForCausalLM) is the same network with biases on q, k and v only
// (--disable-bias-linear --add-qkv-bias), MoE layers where (layer + 1) % decoder_sparse_step == 0
// and the layer is not in mlp_only_layers (any such pattern is a --moe-layer-freq list; the other
// layers are dense MLPs of intermediate_size), experts of moe_intermediate_size, and a shared
// expert of shared_expert_intermediate_size whose output a sigmoid gate scales per token
// (--moe-shared-expert-gate). Its router takes the softmax over all experts, then the top k:
// renormalised over them with norm_topk_prob (Megatron's default routing), as they are without it
// (--moe-router-pre-softmax).
// Qwen3 (Qwen3ForCausalLM) is Llama without biases whose attention normalises each query and key
// head by an RMSNorm of its own (q_norm, k_norm: --qk-layernorm) before RoPE. Qwen3-MoE
// (Qwen3MoeForCausalLM) is Qwen3 with Qwen2-MoE's sparse blocks, without the shared expert.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/gpt_config.hpp"

namespace mgt {

// config.json's model_type values read and written here.
inline constexpr const char* kHfLlamaModelType = "llama";
inline constexpr const char* kHfMistralModelType = "mistral";
inline constexpr const char* kHfMixtralModelType = "mixtral";
inline constexpr const char* kHfQwen2MoeModelType = "qwen2_moe";
inline constexpr const char* kHfQwen3ModelType = "qwen3";
inline constexpr const char* kHfQwen3MoeModelType = "qwen3_moe";

// Whether config.json of this model_type has MistralConfig's fields rather than LlamaConfig's:
// sliding_window, and no attention_bias or mlp_bias (its linear layers have no biases). True for
// mistral and mixtral.
bool hf_has_mistral_fields(const std::string& model_type);
// Whether this model_type's attention has Qwen3's query and key norms (--qk-layernorm).
bool hf_has_qk_norms(const std::string& model_type);
// Whether its sparse blocks are named as Qwen2-MoE's (mlp.gate, mlp.experts.E.gate_proj, ...).
bool hf_has_qwen_sparse_blocks(const std::string& model_type);
// "Llama", "Mistral", "Mixtral", "Qwen2Moe", "Qwen3" or "Qwen3Moe", for messages.
std::string hf_llama_family_name(const std::string& model_type);

// The fields of LlamaConfig / MistralConfig / MixtralConfig that matter here, with transformers' defaults for the
// optional keys (the five sizes are required: a config without them describes no model).
struct HfLlamaConfig {
  std::string model_type = kHfLlamaModelType;  // "llama" | "mistral" | "mixtral"
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_hidden_layers = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_key_value_heads = 0;  // absent or null: num_attention_heads
  std::int64_t head_dim = 0;             // absent or null: hidden_size / num_attention_heads
  std::int64_t max_position_embeddings = 2048;  // MistralConfig's default is 4096·32
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  // rope_scaling (or rope_parameters) of rope_type "llama3": its factor. Its low_freq_factor,
  // high_freq_factor and original_max_position_embeddings are Megatron's fixed 1, 4 and 8192.
  std::optional<double> llama3_rope_factor;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // Llama only: biases of q, k, v and o
  bool mlp_bias = false;        // Llama only: biases of gate, up and down
  double attention_dropout = 0.0;
  double initializer_range = 0.02;
  std::optional<std::int64_t> bos_token_id = 1;
  std::optional<std::int64_t> eos_token_id = 2;
  std::string torch_dtype = "float32";  // of the weights as written: float32, bfloat16 or float16
  // Mistral and Mixtral: null (nullopt) or a window covering every position (the only ones read).
  std::optional<std::int64_t> sliding_window;
  // Mixtral only: num_local_experts experts of intermediate_size in every layer (0: a dense MLP),
  // num_experts_per_tok of them per token; router_aux_loss_coef, Megatron's --moe-aux-loss-coeff
  // (a training setting: transformers adds the loss only with output_router_logits).
  std::int64_t num_local_experts = 0;
  std::int64_t num_experts_per_tok = 2;
  double router_aux_loss_coef = 0.001;
  bool output_router_logits = false;
  // Qwen2-MoE and Qwen3-MoE (num_local_experts holds num_experts, intermediate_size the dense
  // layers'; Qwen3-MoE has no shared expert and no qkv_bias):
  bool qkv_bias = true;
  std::int64_t moe_intermediate_size = 0;
  std::int64_t shared_expert_intermediate_size = 0;
  bool norm_topk_prob = false;
  std::int64_t decoder_sparse_step = 1;
  std::vector<std::int64_t> mlp_only_layers;
  std::int64_t max_window_layers = 28;
};

// Throws mgt::Error "WHAT cannot be expressed as ARCH: ..." naming the first property the Hugging
// Face class has no equivalent for (learned or no position embeddings, partial rotary, LayerNorm,
// an MLP without SwiGLU, biases for Mistral and Mixtral; for Mixtral a dense layer or routing other
// than Mixtral's, for Llama and Mistral a mixture of experts).
void require_llama_expressible(const GptConfig& config, const std::string& model_type, const std::string& what);

// The Llama (or Mistral, or Mixtral) configuration of a model whose word embedding has `vocab_rows` rows.
HfLlamaConfig hf_llama_config_of(const GptConfig& config, const std::string& model_type, std::int64_t vocab_rows,
                                 std::optional<std::int64_t> bos, std::optional<std::int64_t> eos,
                                 const std::string& torch_dtype);

// The mgt configuration of a Llama model trained (or run) on sequences of `seq_length` tokens,
// with a word embedding of `padded_vocab_size` rows. Llama has no residual dropout: hidden_dropout
// is 0.
GptConfig gpt_config_of(const HfLlamaConfig& hf, std::int64_t seq_length, std::int64_t padded_vocab_size);

// config.json as save_pretrained writes it for LlamaForCausalLM / MistralForCausalLM /
// MixtralForCausalLM (keys sorted).
std::string hf_llama_config_json(const HfLlamaConfig& config);

// Reads config.json; throws mgt::Error naming `path` and the key when a field is missing, of the
// wrong type or out of range, or describes something mgt's model does not compute the same way.
HfLlamaConfig parse_hf_llama_config_json(const std::string& text, const std::string& path);

}  // namespace mgt
