#include "train/gpt_config_from_options.hpp"

#include <algorithm>

namespace mgt {

GptConfig gpt_config_from_options(const TrainOptions& options, std::int64_t padded_vocab_size) {
  const ModelShapeOptions& m = options.model;
  GptConfig c;
  c.num_layers = m.num_layers.value_or(0);
  c.hidden_size = m.hidden_size.value_or(0);
  c.num_attention_heads = m.num_attention_heads.value_or(0);
  c.group_query_attention = m.group_query_attention;
  c.num_query_groups = m.num_query_groups;
  c.kv_channels = m.kv_channels.value_or(0);
  c.ffn_hidden_size = m.ffn_hidden_size.value_or(0);
  c.seq_length = m.seq_length.value_or(0);
  c.max_position_embeddings = m.max_position_embeddings.value_or(0);
  c.position_embedding_type = parse_position_embedding_type(m.position_embedding_type);
  c.rotary_percent = m.rotary_percent;
  c.rotary_base = static_cast<double>(m.rotary_base);
  c.use_rope_scaling = m.use_rope_scaling;
  c.rope_scaling_factor = m.rope_scaling_factor;
  c.normalization = parse_normalization(m.normalization);
  c.norm_epsilon = m.norm_epsilon;
  c.layernorm_zero_centered_gamma = m.apply_layernorm_1p;
  c.qk_layernorm = m.qk_layernorm;
  c.activation = mlp_activation(m.swiglu, m.squared_relu, m.openai_gelu, m.bias_gelu_fusion, m.add_bias_linear);
  c.add_bias_linear = m.add_bias_linear;
  c.add_qkv_bias = m.add_qkv_bias;
  c.untie_embeddings_and_output_weights = m.untie_embeddings_and_output_weights;
  c.hidden_dropout = m.hidden_dropout;
  c.attention_dropout = m.attention_dropout;
  c.init_method_std = m.init_method_std;
  c.init_method_xavier_uniform = m.init_method_xavier_uniform;
  c.padded_vocab_size = padded_vocab_size;
  c.recompute_granularity = m.recompute_granularity ? parse_recompute_granularity(*m.recompute_granularity)
                                                    : RecomputeGranularity::kNone;
  c.fp8 = fp8_recipe(options.fp8);
  if (m.recompute_method) c.recompute_method = parse_recompute_method(*m.recompute_method);
  if (m.recompute_num_layers) c.recompute_num_layers = *m.recompute_num_layers;
  const auto recomputes = [&](const char* module) {
    return m.recompute_modules && std::ranges::find(*m.recompute_modules, module) != m.recompute_modules->end();
  };
  c.recompute_core_attention = !m.recompute_modules || recomputes("core_attn");
  c.recompute_layernorm = recomputes("layernorm");
  c.recompute_mlp = recomputes("mlp");
  c.recompute_moe_act = recomputes("moe_act");
  c.recompute_moe = recomputes("moe");
  c.moe = moe_config_from_options(options.moe, c.num_layers);
  return c.resolved();
}

GptFlopsShape gpt_flops_shape(const TrainOptions& options, std::int64_t padded_vocab_size) {
  const GptConfig c = gpt_config_from_options(options, padded_vocab_size);
  GptFlopsShape s;
  s.global_batch_size = options.optim.global_batch_size.value_or(0);
  s.seq_length = c.seq_length;
  s.num_layers = c.num_layers;
  s.hidden_size = c.hidden_size;
  s.ffn_hidden_size = c.ffn_hidden_size;
  s.num_attention_heads = c.num_attention_heads;
  s.num_query_groups = c.query_groups();
  s.kv_channels = c.kv_channels;
  s.padded_vocab_size = c.padded_vocab_size;
  s.swiglu = c.gated_linear_unit();
  if (c.moe.num_experts > 0) {
    for (const bool moe : c.moe.layer_pattern) s.num_moe_layers += moe ? 1 : 0;
    s.moe_ffn_hidden_size = c.moe.ffn_hidden_size;
    s.moe_router_topk = c.moe.topk;
    s.moe_shared_expert_size = c.moe.shared_expert_intermediate_size;
  }
  return s;
}

}  // namespace mgt
