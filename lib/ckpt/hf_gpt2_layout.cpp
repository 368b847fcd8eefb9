#include "ckpt/hf_gpt2_layout.hpp"

#include <algorithm>
#include <tuple>

#include "core/error.hpp"
#include "model/parameter_table.hpp"

namespace mgt {

namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The GPT-2 name and layout of a Megatron parameter name.
std::pair<std::string, HfGpt2Layout> hf_name_of(const std::string& name) {
  const std::string p = kHfGpt2Prefix;
  if (name == "embedding.word_embeddings.weight") return {p + "wte.weight", HfGpt2Layout::kSame};
  if (name == "embedding.position_embeddings.weight") return {p + "wpe.weight", HfGpt2Layout::kSame};
  if (name == "decoder.final_layernorm.weight") return {p + "ln_f.weight", HfGpt2Layout::kSame};
  if (name == "decoder.final_layernorm.bias") return {p + "ln_f.bias", HfGpt2Layout::kSame};
  const std::string layers = "decoder.layers.";
  if (name.rfind(layers, 0) == 0) {
    const std::size_t dot = name.find('.', layers.size());
    const std::string layer = name.substr(layers.size(), dot - layers.size());
    const std::string rest = name.substr(dot + 1);
    const std::string h = p + "h." + layer + ".";
    const bool weight = ends_with(rest, ".weight");
    const std::string kind = weight ? "weight" : "bias";
    const HfGpt2Layout linear = weight ? HfGpt2Layout::kTransposed : HfGpt2Layout::kSame;
    if (rest.rfind("input_layernorm.", 0) == 0) return {h + "ln_1." + kind, HfGpt2Layout::kSame};
    if (rest.rfind("pre_mlp_layernorm.", 0) == 0) return {h + "ln_2." + kind, HfGpt2Layout::kSame};
    if (rest.rfind("self_attention.linear_qkv.", 0) == 0)
      return {h + "attn.c_attn." + kind, weight ? HfGpt2Layout::kFusedQkvWeight : HfGpt2Layout::kFusedQkvBias};
    if (rest.rfind("self_attention.linear_proj.", 0) == 0) return {h + "attn.c_proj." + kind, linear};
    if (rest.rfind("mlp.linear_fc1.", 0) == 0) return {h + "mlp.c_fc." + kind, linear};
    if (rest.rfind("mlp.linear_fc2.", 0) == 0) return {h + "mlp.c_proj." + kind, linear};
  }
  throw Error("parameter '" + name + "' has no GPT-2 counterpart");
}

// Megatron row of fused-QKV element (part, head, channel): head-major, then q/k/v, then channel.
// GPT-2 column: part-major, then head, then channel.
struct QkvIndex {
  std::int64_t heads, head_dim;
  std::int64_t megatron(std::int64_t part, std::int64_t head, std::int64_t ch) const {
    return (head * 3 + part) * head_dim + ch;
  }
  std::int64_t hf(std::int64_t part, std::int64_t head, std::int64_t ch) const {
    return (part * heads + head) * head_dim + ch;
  }
};

std::vector<float> convert(const HfGpt2TensorMapping& m, std::span<const float> in, bool to_hf) {
  const std::vector<std::int64_t>& shape = to_hf ? m.megatron_shape : m.hf_shape;
  std::int64_t numel = 1;
  for (std::int64_t d : shape) numel *= d;
  if (static_cast<std::int64_t>(in.size()) != numel)
    throw Error("tensor '" + (to_hf ? m.megatron_name : m.hf_name) + "' has " + std::to_string(in.size()) +
                " elements, expected " + std::to_string(numel));
  std::vector<float> out(in.size());
  switch (m.layout) {
    case HfGpt2Layout::kSame:
      std::copy(in.begin(), in.end(), out.begin());
      break;
    case HfGpt2Layout::kTransposed: {
      const std::int64_t rows = shape[0], cols = shape[1];
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
      break;
    }
    case HfGpt2Layout::kFusedQkvWeight:
    case HfGpt2Layout::kFusedQkvBias: {
      const std::int64_t width = m.megatron_shape[0];  // 3h
      const QkvIndex q{m.heads, width / 3 / m.heads};
      // Megatron [3h, inner] with inner = h for the weight, 1 for the bias; GPT-2 [inner, 3h].
      const std::int64_t inner = m.layout == HfGpt2Layout::kFusedQkvWeight ? m.megatron_shape[1] : 1;
      for (std::int64_t part = 0; part < 3; ++part)
        for (std::int64_t head = 0; head < q.heads; ++head)
          for (std::int64_t ch = 0; ch < q.head_dim; ++ch) {
            const std::int64_t row = q.megatron(part, head, ch), col = q.hf(part, head, ch);
            for (std::int64_t i = 0; i < inner; ++i) {
              const std::int64_t megatron_at = row * inner + i, hf_at = i * width + col;
              if (to_hf) out[hf_at] = in[megatron_at];
              else out[megatron_at] = in[hf_at];
            }
          }
      break;
    }
  }
  return out;
}

}  // namespace

std::vector<HfGpt2TensorMapping> hf_gpt2_tensor_mappings(const GptConfig& config) {
  const GptConfig c = config.resolved();
  std::vector<HfGpt2TensorMapping> mappings;
  for (const ParameterEntry& e : gpt_parameter_table(c).entries) {
    HfGpt2TensorMapping m;
    m.megatron_name = e.name;
    std::tie(m.hf_name, m.layout) = hf_name_of(e.name);
    m.megatron_shape = e.global_shape;
    m.hf_shape = e.global_shape;
    if (m.layout == HfGpt2Layout::kTransposed || m.layout == HfGpt2Layout::kFusedQkvWeight)
      m.hf_shape = {e.global_shape[1], e.global_shape[0]};
    m.heads = c.num_attention_heads;
    mappings.push_back(std::move(m));
  }
  return mappings;
}

std::vector<float> to_hf_layout(const HfGpt2TensorMapping& mapping, std::span<const float> megatron) {
  return convert(mapping, megatron, true);
}

std::vector<float> from_hf_layout(const HfGpt2TensorMapping& mapping, std::span<const float> hf) {
  return convert(mapping, hf, false);
}

}  // namespace mgt
