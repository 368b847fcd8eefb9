// Where each of a Llama-expressible model's tensors goes in Hugging Face's LlamaForCausalLM (and
// MistralForCausalLM, which names them the same way, and MixtralForCausalLM), and how its rows move. Both sides store
// linear weights as torch.nn.Linear does, [out, in], so nothing is transposed; Megatron fuses
// two projections that Llama keeps apart:
// - linear_qkv [(n + 2g)·d, h] holds, per query group j = 0…g−1, the rows of its n/g query heads,
//   then k_j, then v_j (megatron/core/transformer/attention.py get_query_key_value_tensors);
//   Llama's q_proj [n·d, h], k_proj [g·d, h], v_proj [g·d, h] hold heads in order. Megatron's
//   tools/checkpoint/loader_llama_mistral.py (set_attn_state) builds the fused rows the same way.
// - linear_fc1 [2f, h] is [gate ; up] (megatron/core/transformer/mlp.py, chunk(2) of the
//   output), Llama's gate_proj and up_proj [f, h] each.
// - Mixtral's sparse block: the router is block_sparse_moe.gate [E, h]; expert j's linear_fc1 is
//   [w1 (gate) ; w3 (up)] of block_sparse_moe.experts.j, its linear_fc2 w2 (Megatron's
//   tools/checkpoint/loader_mixtral_hf.py set_mlp_state).
// - Qwen2-MoE's sparse block: the router is mlp.gate [E, h]; expert j's linear_fc1 is
//   [gate_proj ; up_proj] of mlp.experts.j, its linear_fc2 down_proj; the shared experts' the same
//   of mlp.shared_expert, and their gate_weight [1, h] is mlp.shared_expert_gate.
// - Qwen3-MoE's sparse block: Qwen2-MoE's without the shared expert.
// - Qwen3's query and key norms, self_attn.q_norm and k_norm [d], are q_layernorm and k_layernorm.
// Biases, when the model has them, split the same way. No rotary permutation of q and k is
// needed: Megatron's rope (non-interleaved) and Llama's rotate_half both pair channel i with
// channel i + d/2; only Meta's original checkpoints interleave them.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/gpt_config.hpp"

namespace mgt {

// One Hugging Face tensor that makes up (part of) a Megatron parameter.
struct HfLlamaPart {
  std::string hf_name;  // e.g. model.layers.0.self_attn.q_proj.weight
  std::vector<std::int64_t> hf_shape;
};

// `rows` consecutive rows of part `part`, from its row `first_row`: one piece of the Megatron
// tensor, whose rows are these blocks in order.
struct HfLlamaRowBlock {
  std::size_t part = 0;
  std::int64_t first_row = 0;
  std::int64_t rows = 0;
};

struct HfLlamaTensorMapping {
  std::string megatron_name;  // e.g. decoder.layers.0.self_attention.linear_qkv.weight
  std::vector<std::int64_t> megatron_shape;
  std::vector<HfLlamaPart> parts;      // one, or q/k/v, or gate/up
  std::vector<HfLlamaRowBlock> rows;   // the Megatron rows, block by block
};

// One mapping per parameter of the model, in the parameter table's order. The config must be
// Llama-expressible (require_llama_expressible).
// The sparse blocks are named as `model_type` names them: Qwen2-MoE's for qwen2_moe and
// qwen3_moe, Mixtral's otherwise.
std::vector<HfLlamaTensorMapping> hf_llama_tensor_mappings(const GptConfig& config,
                                                           const std::string& model_type = "mixtral");

// Megatron's tensor → its Hugging Face parts (in mapping.parts order), and back.
std::vector<std::vector<float>> to_hf_parts(const HfLlamaTensorMapping& mapping, std::span<const float> megatron);
std::vector<float> from_hf_parts(const HfLlamaTensorMapping& mapping, const std::vector<std::vector<float>>& parts);

// The position of a tensor in LlamaForCausalLM's state_dict (modules in construction order:
// embed_tokens, each layer's q, k, v, o, gate, up, down (Mixtral: its router, then each expert's
// w1, w2, w3), input_layernorm, post_attention_layernorm, then norm and lm_head), which decides
// how save_pretrained shards.
std::int64_t hf_llama_state_dict_position(const std::string& hf_name);

// LlamaForCausalLM's prefix of the LlamaModel weights (lm_head.weight has none). Checkpoints
// saved from LlamaModel carry the same names without it.
inline constexpr const char* kHfLlamaPrefix = "model.";

}  // namespace mgt
