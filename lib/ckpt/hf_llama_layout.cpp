#include "ckpt/hf_llama_layout.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <string>

#include "ckpt/hf_llama_config.hpp"
#include "core/error.hpp"
#include "model/parameter_table.hpp"

namespace mgt {

namespace {

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// Names inside a layer, in the order LlamaDecoderLayer registers its modules (Qwen3's attention
// registers its query and key norms after o_proj).
constexpr std::array<const char*, 18> kLayerTensorOrder = {
    "self_attn.q_proj.weight", "self_attn.q_proj.bias",  "self_attn.k_proj.weight", "self_attn.k_proj.bias",
    "self_attn.v_proj.weight", "self_attn.v_proj.bias",  "self_attn.o_proj.weight", "self_attn.o_proj.bias",
    "self_attn.q_norm.weight", "self_attn.k_norm.weight",
    "mlp.gate_proj.weight",    "mlp.gate_proj.bias",     "mlp.up_proj.weight",      "mlp.up_proj.bias",
    "mlp.down_proj.weight",    "mlp.down_proj.bias",     "input_layernorm.weight",  "post_attention_layernorm.weight"};
// Where a Mixtral layer's sparse block sits among them: in the MLP's place.
constexpr std::int64_t kSparseBlockSlot = 10;
// Within it, MixtralSparseMoeBlock's order: the router (gate), then each expert's w1, w2, w3
// (transformers 4's MixtralBlockSparseTop2MLP; transformers 5 writes the same names).
constexpr std::int64_t kExpertTensors = 3;
constexpr std::int64_t kMaxExperts = std::int64_t{1} << 24;

struct NumberedExpert {
  std::int64_t index;
  std::string rest;  // the expert's tensor name after "experts.E."
};

// "experts.E.REST" with E a decimal of at most 7 digits → {E, REST}; nothing for another name.
std::optional<NumberedExpert> numbered_expert(const std::string& name) {
  const std::string experts = "experts.";
  if (!starts_with(name, experts)) return std::nullopt;
  const std::size_t dot = name.find('.', experts.size());
  if (dot == std::string::npos || dot == experts.size()) return std::nullopt;
  const std::string index = name.substr(experts.size(), dot - experts.size());
  if (index.find_first_not_of("0123456789") != std::string::npos || index.size() > 7) return std::nullopt;
  return NumberedExpert{std::stoll(index), name.substr(dot + 1)};
}

// block_sparse_moe.gate.weight or block_sparse_moe.experts.E.wN.weight → its position in the
// block (gate 0, then 1 + 3·E + N − 1); −1 for another name.
std::int64_t mixtral_block_position(const std::string& rest);

// Qwen2MoeSparseMoeBlock's order: mlp.gate, each expert's gate_proj, up_proj, down_proj, the
// shared expert's three, then shared_expert_gate (after all possible experts); −1 for another name.
std::int64_t qwen2_moe_block_position(const std::string& rest) {
  const std::string block = "mlp.";
  if (!starts_with(rest, block)) return -1;
  const std::string name = rest.substr(block.size());
  auto projection = [](const std::string& w) {
    return w == "gate_proj.weight" ? 0 : w == "up_proj.weight" ? 1 : w == "down_proj.weight" ? 2 : -1;
  };
  if (name == "gate.weight") return 0;
  const std::int64_t shared_at = 1 + kMaxExperts * kExpertTensors;
  if (name == "shared_expert_gate.weight") return shared_at + kExpertTensors;
  const std::string shared = "shared_expert.";
  if (starts_with(name, shared)) {
    const std::int64_t which = projection(name.substr(shared.size()));
    return which < 0 ? -1 : shared_at + which;
  }
  const std::optional<NumberedExpert> expert = numbered_expert(name);
  if (!expert) return -1;
  const std::int64_t which = projection(expert->rest);
  return which < 0 ? -1 : 1 + expert->index * kExpertTensors + which;
}

std::int64_t sparse_block_position(const std::string& rest) {
  const std::int64_t qwen = qwen2_moe_block_position(rest);
  return qwen >= 0 ? qwen : mixtral_block_position(rest);
}

std::int64_t mixtral_block_position(const std::string& rest) {
  const std::string block = "block_sparse_moe.";
  if (!starts_with(rest, block)) return -1;
  const std::string name = rest.substr(block.size());
  if (name == "gate.weight") return 0;
  const std::optional<NumberedExpert> expert = numbered_expert(name);
  if (!expert) return -1;
  const std::string& w = expert->rest;
  const std::int64_t which = w == "w1.weight" ? 0 : w == "w2.weight" ? 1 : w == "w3.weight" ? 2 : -1;
  if (which < 0) return -1;
  return 1 + expert->index * kExpertTensors + which;
}

// A Megatron parameter that maps to one Hugging Face tensor of the same shape.
HfLlamaTensorMapping whole(const ParameterEntry& e, std::string hf_name) {
  HfLlamaTensorMapping m;
  m.megatron_name = e.name;
  m.megatron_shape = e.global_shape;
  m.parts = {{std::move(hf_name), e.global_shape}};
  m.rows = {{0, 0, e.global_shape[0]}};
  return m;
}

// A part of `rows` rows with the Megatron tensor's trailing dimensions.
HfLlamaPart part_of(const ParameterEntry& e, std::string hf_name, std::int64_t rows) {
  std::vector<std::int64_t> shape = e.global_shape;
  shape[0] = rows;
  return {std::move(hf_name), std::move(shape)};
}

// [gate ; up] of `rows` rows each, from two Hugging Face tensors.
HfLlamaTensorMapping gate_and_up(const ParameterEntry& e, std::string gate, std::string up, std::int64_t rows) {
  HfLlamaTensorMapping m;
  m.megatron_name = e.name;
  m.megatron_shape = e.global_shape;
  m.parts = {part_of(e, std::move(gate), rows), part_of(e, std::move(up), rows)};
  m.rows = {{0, 0, rows}, {1, 0, rows}};
  return m;
}

// A Qwen2-MoE or Qwen3-MoE layer's sparse block (Qwen2MoeSparseMoeBlock's names as
// save_pretrained writes them; Qwen3's has no shared expert), `rest` the parameter's name inside
// the layer; nullopt for another parameter.
std::optional<HfLlamaTensorMapping> qwen_sparse_block_mapping(const ParameterEntry& e, const GptConfig& c,
                                                      const std::string& layer, const std::string& rest) {
  const std::string block = layer + "mlp.";
  if (rest == "mlp.router.weight") return whole(e, block + "gate.weight");
  if (rest == "mlp.shared_experts.gate_weight") return whole(e, block + "shared_expert_gate.weight");
  std::string expert;
  std::string linear;
  std::int64_t ffn = 0;
  const std::string routed = "mlp.experts.local_experts.";
  const std::string shared = "mlp.shared_experts.";
  if (starts_with(rest, routed)) {
    const std::size_t at = rest.find('.', routed.size());
    expert = block + "experts." + rest.substr(routed.size(), at - routed.size()) + ".";
    linear = rest.substr(at + 1);
    ffn = c.moe.ffn_hidden_size;
  } else if (starts_with(rest, shared)) {
    expert = block + "shared_expert.";
    linear = rest.substr(shared.size());
    ffn = c.moe.shared_expert_intermediate_size;
  } else {
    return std::nullopt;
  }
  if (linear == "linear_fc2.weight") return whole(e, expert + "down_proj.weight");
  if (linear == "linear_fc1.weight") return gate_and_up(e, expert + "gate_proj.weight", expert + "up_proj.weight", ffn);
  return std::nullopt;
}

HfLlamaTensorMapping mapping_of(const ParameterEntry& e, const GptConfig& c, bool qwen_sparse_blocks) {
  const std::string& name = e.name;
  const std::string p = kHfLlamaPrefix;
  if (name == "embedding.word_embeddings.weight") return whole(e, p + "embed_tokens.weight");
  if (name == "decoder.final_layernorm.weight") return whole(e, p + "norm.weight");
  if (name == "output_layer.weight") return whole(e, "lm_head.weight");
  const std::string layers = "decoder.layers.";
  if (starts_with(name, layers)) {
    const std::size_t dot = name.find('.', layers.size());
    const std::string layer = p + "layers." + name.substr(layers.size(), dot - layers.size()) + ".";
    const std::string rest = name.substr(dot + 1);
    const std::string kind = rest.substr(rest.rfind('.') + 1);  // weight | bias
    if (rest == "input_layernorm.weight") return whole(e, layer + "input_layernorm.weight");
    if (rest == "pre_mlp_layernorm.weight") return whole(e, layer + "post_attention_layernorm.weight");
    if (rest == "self_attention.q_layernorm.weight") return whole(e, layer + "self_attn.q_norm.weight");
    if (rest == "self_attention.k_layernorm.weight") return whole(e, layer + "self_attn.k_norm.weight");
    if (starts_with(rest, "self_attention.linear_proj.")) return whole(e, layer + "self_attn.o_proj." + kind);
    if (starts_with(rest, "mlp.linear_fc2.")) return whole(e, layer + "mlp.down_proj." + kind);
    if (starts_with(rest, "self_attention.linear_qkv.")) {
      const std::int64_t d = c.kv_channels, groups = c.query_groups();
      const std::int64_t heads_per_group = c.num_attention_heads / groups;
      HfLlamaTensorMapping m;
      m.megatron_name = name;
      m.megatron_shape = e.global_shape;
      m.parts = {part_of(e, layer + "self_attn.q_proj." + kind, c.num_attention_heads * d),
                 part_of(e, layer + "self_attn.k_proj." + kind, groups * d),
                 part_of(e, layer + "self_attn.v_proj." + kind, groups * d)};
      for (std::int64_t j = 0; j < groups; ++j) {
        m.rows.push_back({0, j * heads_per_group * d, heads_per_group * d});
        m.rows.push_back({1, j * d, d});
        m.rows.push_back({2, j * d, d});
      }
      return m;
    }
    if (qwen_sparse_blocks)
      if (std::optional<HfLlamaTensorMapping> m = qwen_sparse_block_mapping(e, c, layer, rest)) return *m;
    // A Mixtral layer's sparse block: the router, and each expert's fc1 = [w1 (gate) ; w3 (up)]
    // and fc2 = w2, as tools/checkpoint/loader_mixtral_hf.py concatenates them.
    const std::string block = layer + "block_sparse_moe.";
    if (rest == "mlp.router.weight") return whole(e, block + "gate.weight");
    const std::string experts = "mlp.experts.local_experts.";
    if (starts_with(rest, experts)) {
      const std::size_t at = rest.find('.', experts.size());
      const std::string expert = block + "experts." + rest.substr(experts.size(), at - experts.size()) + ".";
      const std::string linear = rest.substr(at + 1);
      if (linear == "linear_fc2.weight") return whole(e, expert + "w2.weight");
      if (linear == "linear_fc1.weight") {
        const std::int64_t f = c.moe.ffn_hidden_size;
        HfLlamaTensorMapping m;
        m.megatron_name = name;
        m.megatron_shape = e.global_shape;
        m.parts = {part_of(e, expert + "w1.weight", f), part_of(e, expert + "w3.weight", f)};
        m.rows = {{0, 0, f}, {1, 0, f}};
        return m;
      }
    }
    if (starts_with(rest, "mlp.linear_fc1.")) {
      const std::int64_t f = c.ffn_hidden_size;
      HfLlamaTensorMapping m;
      m.megatron_name = name;
      m.megatron_shape = e.global_shape;
      m.parts = {part_of(e, layer + "mlp.gate_proj." + kind, f), part_of(e, layer + "mlp.up_proj." + kind, f)};
      m.rows = {{0, 0, f}, {1, 0, f}};
      return m;
    }
  }
  throw Error("parameter '" + name + "' has no Llama counterpart");
}

std::int64_t elements(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

}  // namespace

std::vector<HfLlamaTensorMapping> hf_llama_tensor_mappings(const GptConfig& config, const std::string& model_type) {
  const GptConfig c = config.resolved();
  const bool qwen_sparse_blocks = hf_has_qwen_sparse_blocks(model_type);
  std::vector<HfLlamaTensorMapping> mappings;
  for (const ParameterEntry& e : gpt_parameter_table(c).entries)
    mappings.push_back(mapping_of(e, c, qwen_sparse_blocks));
  return mappings;
}

std::vector<std::vector<float>> to_hf_parts(const HfLlamaTensorMapping& m, std::span<const float> megatron) {
  if (static_cast<std::int64_t>(megatron.size()) != elements(m.megatron_shape))
    throw Error("tensor '" + m.megatron_name + "' has " + std::to_string(megatron.size()) + " elements, expected " +
                std::to_string(elements(m.megatron_shape)));
  const std::int64_t inner = elements(m.megatron_shape) / m.megatron_shape[0];
  std::vector<std::vector<float>> parts;
  for (const HfLlamaPart& part : m.parts) parts.emplace_back(static_cast<std::size_t>(elements(part.hf_shape)));
  std::int64_t row = 0;
  for (const HfLlamaRowBlock& b : m.rows) {
    std::copy_n(megatron.begin() + row * inner, b.rows * inner, parts[b.part].begin() + b.first_row * inner);
    row += b.rows;
  }
  return parts;
}

std::vector<float> from_hf_parts(const HfLlamaTensorMapping& m, const std::vector<std::vector<float>>& parts) {
  if (parts.size() != m.parts.size())
    throw Error("tensor '" + m.megatron_name + "' needs " + std::to_string(m.parts.size()) + " Hugging Face tensors");
  for (std::size_t i = 0; i < parts.size(); ++i)
    if (static_cast<std::int64_t>(parts[i].size()) != elements(m.parts[i].hf_shape))
      throw Error("tensor '" + m.parts[i].hf_name + "' has " + std::to_string(parts[i].size()) +
                  " elements, expected " + std::to_string(elements(m.parts[i].hf_shape)));
  const std::int64_t inner = elements(m.megatron_shape) / m.megatron_shape[0];
  std::vector<float> megatron(static_cast<std::size_t>(elements(m.megatron_shape)));
  std::int64_t row = 0;
  for (const HfLlamaRowBlock& b : m.rows) {
    const auto from = parts[b.part].begin() + b.first_row * inner;
    std::copy(from, from + b.rows * inner, megatron.begin() + row * inner);
    row += b.rows;
  }
  return megatron;
}

std::int64_t hf_llama_state_dict_position(const std::string& hf_name) {
  const std::string p = kHfLlamaPrefix;
  const std::string name = starts_with(hf_name, p) ? hf_name.substr(p.size()) : hf_name;
  // Each slot of a layer leaves room for a sparse block's tensors.
  constexpr std::int64_t kSlot = 1 + (kMaxExperts + 1) * kExpertTensors + 1;  // Qwen2-MoE's shared expert too
  constexpr std::int64_t kPerLayer = static_cast<std::int64_t>(kLayerTensorOrder.size()) * kSlot;
  if (name == "embed_tokens.weight") return 0;
  if (name == "lm_head.weight") return std::numeric_limits<std::int64_t>::max();
  if (name == "norm.weight") return std::numeric_limits<std::int64_t>::max() - 1;
  if (starts_with(name, "layers.")) {
    const std::size_t dot = name.find('.', 7);
    const std::int64_t layer = std::stoll(name.substr(7, dot - 7));
    const std::string rest = name.substr(dot + 1);
    if (const std::int64_t in_block = sparse_block_position(rest); in_block >= 0)
      return 1 + layer * kPerLayer + kSparseBlockSlot * kSlot + in_block;
    const auto at = std::find(kLayerTensorOrder.begin(), kLayerTensorOrder.end(), rest);
    return 1 + layer * kPerLayer + (at - kLayerTensorOrder.begin()) * kSlot;
  }
  return std::numeric_limits<std::int64_t>::max() - 2;
}

}  // namespace mgt
