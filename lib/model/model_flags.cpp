#include "model/model_flags.hpp"

namespace mgt {

// Ranges of the numbers: core/flag_ranges.cpp. Checks between flags: train/train_options_validate.cpp.
// clang-format off
std::vector<FlagDefinition> model_flags(ModelShapeOptions& m) {
  return {
    store("num-layers", "N", m.num_layers, "Transformer layers").required(),
    store("hidden-size", "N", m.hidden_size, "Hidden size").required(),
    store("num-attention-heads", "N", m.num_attention_heads, "Attention heads").required(),
    store("ffn-hidden-size", "N", m.ffn_hidden_size, "MLP hidden size")
        .default_text("4 x hidden, or int(8 x hidden / 3 / 64) x 64 with --swiglu"),
    store("kv-channels", "N", m.kv_channels, "Channels per head").default_text("hidden / heads"),
    store_true("group-query-attention", m.group_query_attention, "Grouped-query attention with --num-query-groups groups"),
    // Megatron's args hold one group per head without GQA.
    store("num-query-groups", "N", m.num_query_groups, "Key/value groups with --group-query-attention")
        .recorded_as([&m] { return ArgValue(m.query_groups()); }),
    store("seq-length", "N", m.seq_length, "Tokens per sample").required(),
    store("max-position-embeddings", "N", m.max_position_embeddings, "Position table size, at least --seq-length").required(),
    store("position-embedding-type", "TYPE", m.position_embedding_type, "learned_absolute, rope or none")
        .choices({"learned_absolute", "rope", "none"}, {"mrope", "relative"}),
    store_false("no-position-embedding", m.add_position_embedding, "Deprecated: no learned position table; accepted with --position-embedding-type rope, which has none")
        .key("add_position_embedding"),
    store_true("use-rotary-position-embeddings", m.use_rotary_position_embeddings, "Deprecated: --position-embedding-type rope, which it sets (as Megatron's validate_args does)"),
    store("rotary-percent", "F", m.rotary_percent, "Fraction of each head rotated by RoPE"),
    store("rotary-base", "N", m.rotary_base, "RoPE base"),
    store_true("use-rope-scaling", m.use_rope_scaling, "Llama 3.1's scaling of the RoPE frequencies (low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192)"),
    store("rope-scaling-factor", "F", m.rope_scaling_factor, "Factor of Llama 3.1's RoPE scaling"),
    store("normalization", "NORM", m.normalization, "LayerNorm or RMSNorm").choices({"LayerNorm", "RMSNorm"}),
    store("norm-epsilon", "F", m.norm_epsilon, "Norm epsilon"),
    store_true("apply-layernorm-1p", m.apply_layernorm_1p, "Norm weights stored zero-centred (initialised to 0), the norm scaling by 1 + weight"),
    store_true("qk-layernorm", m.qk_layernorm, "Normalise each query and key head over its --kv-channels (by --normalization, with a weight of that size shared by the heads, and a bias for LayerNorm) after the QKV projection and before RoPE: Qwen3's and OLMo 2's attention"),
    store_true("swiglu", m.swiglu, "SwiGLU MLP"),
    store_true("squared-relu", m.squared_relu, "Squared ReLU in the MLP, relu(x)^2 (Nemotron-4's), instead of GELU; needs --no-bias-gelu-fusion or --disable-bias-linear, as in Megatron"),
    store_true("openai-gelu", m.openai_gelu, "GELU by its tanh approximation (OpenAI's GPT-2)"),
    // Megatron turns the fusion off in linears without biases; the record says what ran.
    store_false("no-bias-gelu-fusion", m.bias_gelu_fusion, "GELU in its exact erf form instead of the tanh approximation that Megatron's fused bias-GELU computes")
        .key("bias_gelu_fusion").recorded_as([&m] { return ArgValue(m.bias_gelu_fusion && m.add_bias_linear); }),
    store_false("disable-bias-linear", m.add_bias_linear, "No biases in the linear layers").key("add_bias_linear"),
    store_true("add-qkv-bias", m.add_qkv_bias, "Biases on the query, key and value projections, also with --disable-bias-linear (Qwen2's attention)"),
    store_true("untie-embeddings-and-output-weights", m.untie_embeddings_and_output_weights, "Separate output layer weights"),
    store("hidden-dropout", "P", m.hidden_dropout, "Dropout after attention, MLP and embedding"),
    store("attention-dropout", "P", m.attention_dropout, "Dropout of attention probabilities"),
    store("init-method-std", "F", m.init_method_std, "Standard deviation of initial weights"),
    store_true("init-method-xavier-uniform", m.init_method_xavier_uniform, "Initial weights from U(-a, a), a = sqrt(6 / (fan_in + fan_out)) of each whole weight, instead of normals of --init-method-std (Megatron's xavier_uniform_)"),
    store("make-vocab-size-divisible-by", "N", m.make_vocab_size_divisible_by, "Pad the vocabulary to a multiple of N x TP"),
    store_true("recompute-activations", m.recompute_activations, "Selective activation recomputation"),
    store("recompute-granularity", "G", m.recompute_granularity, "full or selective").choices({"full", "selective"}),
    store("recompute-method", "M", m.recompute_method, "uniform or block (with full granularity)").choices({"uniform", "block"}),
    store("recompute-num-layers", "N", m.recompute_num_layers, "uniform: layers per checkpointed group; block: layers checkpointed in each pipeline stage (with full granularity)"),
    store_list("recompute-modules", "MODULE...", m.recompute_modules, "Submodules that selective granularity recomputes: core_attn, layernorm, mlp, moe_act, moe (mla_up_proj is refused)")
        .default_text("core_attn"),
  };
}
// clang-format on

}  // namespace mgt
