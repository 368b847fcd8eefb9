// Where each of a GPT-2-expressible model's tensors goes in Hugging Face's GPT2LMHeadModel, and
// how its elements move:
// - linear weights: Megatron stores [out, in] (torch.nn.Linear); GPT-2's Conv1D stores [in, out],
//   so every weight is transposed;
// - the fused QKV projection: Megatron's rows go head by head, [q_j k_j v_j] for j = 0…n−1
//   (spec §6.2: per query group, and GPT-2 has one group per head); GPT-2's columns go
//   [all q | all k | all v], head j at columns j·d…(j+1)·d of each third. The bias likewise;
// - embeddings and norms are the same arrays under other names.
// GPT-2's lm_head.weight is the word embedding itself: transformers ties it and saves only
// transformer.wte.weight, so no mapping produces it.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/gpt_config.hpp"

namespace mgt {

enum class HfGpt2Layout {
  kSame,            // same shape, same order
  kTransposed,      // [out, in] ↔ [in, out]
  kFusedQkvWeight,  // [3h, h] per-head rows ↔ [h, 3h] q|k|v columns
  kFusedQkvBias,    // [3h] per-head ↔ [3h] q|k|v
};

struct HfGpt2TensorMapping {
  std::string megatron_name;  // e.g. decoder.layers.0.self_attention.linear_qkv.weight
  std::string hf_name;        // e.g. transformer.h.0.attn.c_attn.weight
  HfGpt2Layout layout = HfGpt2Layout::kSame;
  std::vector<std::int64_t> megatron_shape;
  std::vector<std::int64_t> hf_shape;
  std::int64_t heads = 0;  // for the fused QKV layouts
};

// One mapping per parameter of the model, in the parameter table's order. The config must be
// GPT-2-expressible (require_gpt2_expressible).
std::vector<HfGpt2TensorMapping> hf_gpt2_tensor_mappings(const GptConfig& config);

// Megatron's element order → GPT-2's, and back; the two are inverse permutations.
std::vector<float> to_hf_layout(const HfGpt2TensorMapping& mapping, std::span<const float> megatron);
std::vector<float> from_hf_layout(const HfGpt2TensorMapping& mapping, std::span<const float> hf);

// GPT2LMHeadModel's prefix of the GPT2Model weights. Checkpoints saved from GPT2Model (the
// original "gpt2" on the Hub among them) carry the same names without it.
inline constexpr const char* kHfGpt2Prefix = "transformer.";

}  // namespace mgt
