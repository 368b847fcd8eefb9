#include "ckpt/hf_gpt2_config.hpp"

#include <cmath>
#include <string>

#include "core/error.hpp"
#include "core/json_scalars.hpp"
#include "core/json_text.hpp"
#include "data/python_json.hpp"

namespace mgt {

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }
std::string real_text(double v) { return python_float_repr(v); }

// The largest model dimension config.json may give: mgt's flags for them stop there too
// (core/flag_ranges.cpp), and shapes multiply them in 64-bit arithmetic.
constexpr std::int64_t kMaxDimension = 2147483647;

// transformers' ACT2FN names for the activations mgt computes. gelu_new, gelu_pytorch_tanh and
// gelu_fast are the same tanh formula written three ways; relu2 is ReLUSquaredActivation,
// relu(x)², --squared-relu.
bool is_erf_gelu(const std::string& name) { return name == "gelu"; }
bool is_squared_relu(const std::string& name) { return name == "relu2"; }
bool is_tanh_gelu(const std::string& name) {
  return name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast";
}

}  // namespace

void require_gpt2_expressible(const GptConfig& config, const std::string& what) {
  const GptConfig c = config.resolved();
  auto refuse = [&](const std::string& why) { throw Error(what + " cannot be expressed as GPT-2: " + why); };
  if (c.position_embedding_type != PositionEmbeddingType::kLearnedAbsolute)
    refuse("--position-embedding-type " + std::string(to_string(c.position_embedding_type)) +
           " (GPT-2 has learned absolute position embeddings only)");
  if (c.normalization != Normalization::kLayerNorm)
    refuse("--normalization " + std::string(to_string(c.normalization)) + " (GPT-2 uses LayerNorm)");
  if (c.layernorm_zero_centered_gamma)
    refuse("--apply-layernorm-1p (GPT-2's LayerNorm scales by its weight, not by 1 + weight)");
  if (c.qk_layernorm) refuse("--qk-layernorm (GPT-2's attention has no query and key norms)");
  if (c.activation == Activation::kSwiglu)
    refuse("--swiglu (GPT-2's MLP is one projection, then an activation, then another)");
  if (c.moe.enabled()) refuse("--num-experts " + str(c.moe.num_experts) + " (GPT-2's MLP is dense)");
  if (!c.add_bias_linear) refuse("--disable-bias-linear (GPT-2's linear layers have biases)");
  if (c.untie_embeddings_and_output_weights)
    refuse("--untie-embeddings-and-output-weights (GPT-2's output layer is its word embedding)");
  if (c.query_groups() != c.num_attention_heads)
    refuse("grouped-query attention, --num-query-groups " + str(c.query_groups()) + " with " +
           str(c.num_attention_heads) + " heads (every GPT-2 head has its own key and value)");
  if (c.kv_channels * c.num_attention_heads != c.hidden_size)
    refuse("--kv-channels " + str(c.kv_channels) + " with " + str(c.num_attention_heads) + " heads and --hidden-size " +
           str(c.hidden_size) + " (GPT-2's heads split the hidden size exactly)");
}

HfGpt2Config hf_gpt2_config_of(const GptConfig& config, std::int64_t vocab_rows, std::int64_t eod) {
  const GptConfig c = config.resolved();
  HfGpt2Config hf;
  hf.vocab_size = vocab_rows;
  hf.n_positions = c.max_position_embeddings;
  hf.n_embd = c.hidden_size;
  hf.n_layer = c.num_layers;
  hf.n_head = c.num_attention_heads;
  hf.n_inner = c.ffn_hidden_size;
  hf.activation_function = c.activation == Activation::kOpenaiGelu    ? "gelu_new"
                           : c.activation == Activation::kSquaredRelu ? "relu2"
                                                                       : "gelu";
  hf.resid_pdrop = c.hidden_dropout;
  hf.embd_pdrop = c.hidden_dropout;
  hf.attn_pdrop = c.attention_dropout;
  hf.layer_norm_epsilon = c.norm_epsilon;
  hf.initializer_range = c.init_method_std;
  hf.bos_token_id = eod;
  hf.eos_token_id = eod;
  return hf;
}

GptConfig gpt_config_of(const HfGpt2Config& hf, std::int64_t seq_length, std::int64_t padded_vocab_size) {
  GptConfig c;
  c.num_layers = hf.n_layer;
  c.hidden_size = hf.n_embd;
  c.num_attention_heads = hf.n_head;
  c.ffn_hidden_size = hf.n_inner.value_or(4 * hf.n_embd);
  c.seq_length = seq_length;
  c.max_position_embeddings = hf.n_positions;
  c.position_embedding_type = PositionEmbeddingType::kLearnedAbsolute;
  c.normalization = Normalization::kLayerNorm;
  c.norm_epsilon = hf.layer_norm_epsilon;
  c.activation = is_tanh_gelu(hf.activation_function)      ? Activation::kOpenaiGelu
                 : is_squared_relu(hf.activation_function) ? Activation::kSquaredRelu
                                                           : Activation::kGelu;
  c.add_bias_linear = true;
  c.untie_embeddings_and_output_weights = false;
  // Megatron has one dropout for the embedding and the residual branches; resid_pdrop is the
  // one applied most often.
  c.hidden_dropout = hf.resid_pdrop;
  c.attention_dropout = hf.attn_pdrop;
  c.init_method_std = hf.initializer_range;
  c.padded_vocab_size = padded_vocab_size;
  if (hf.n_embd % hf.n_head != 0)
    throw Error("GPT-2 config: n_embd (" + str(hf.n_embd) + ") is not divisible by n_head (" + str(hf.n_head) + ")");
  return c.resolved();
}

std::string hf_gpt2_config_json(const HfGpt2Config& hf) {
  // Keys in sorted order, as PretrainedConfig.to_json_string writes them.
  PyValue j = PyValue::dict();
  j.set("activation_function", PyValue::string(hf.activation_function));
  j.set("architectures", PyValue::list({PyValue::string("GPT2LMHeadModel")}));
  j.set("attn_pdrop", PyValue::real(hf.attn_pdrop));
  // An id outside the vocabulary (GPT-2's 50256 in a smaller model) would make transformers warn.
  auto token = [&](std::int64_t id) { return id >= 0 && id < hf.vocab_size ? PyValue::integer(id) : PyValue::none(); };
  j.set("bos_token_id", token(hf.bos_token_id));
  j.set("embd_pdrop", PyValue::real(hf.embd_pdrop));
  j.set("eos_token_id", token(hf.eos_token_id));
  j.set("initializer_range", PyValue::real(hf.initializer_range));
  j.set("layer_norm_epsilon", PyValue::real(hf.layer_norm_epsilon));
  j.set("model_type", PyValue::string("gpt2"));
  j.set("n_ctx", PyValue::integer(hf.n_positions));
  j.set("n_embd", PyValue::integer(hf.n_embd));
  j.set("n_head", PyValue::integer(hf.n_head));
  j.set("n_inner", hf.n_inner ? PyValue::integer(*hf.n_inner) : PyValue::none());
  j.set("n_layer", PyValue::integer(hf.n_layer));
  j.set("n_positions", PyValue::integer(hf.n_positions));
  j.set("reorder_and_upcast_attn", PyValue::boolean(false));
  j.set("resid_pdrop", PyValue::real(hf.resid_pdrop));
  j.set("scale_attn_by_inverse_layer_idx", PyValue::boolean(false));
  j.set("scale_attn_weights", PyValue::boolean(true));
  j.set("tie_word_embeddings", PyValue::boolean(true));
  j.set("torch_dtype", PyValue::string(hf.torch_dtype));
  j.set("use_cache", PyValue::boolean(true));
  j.set("vocab_size", PyValue::integer(hf.vocab_size));
  return j.dumps() + "\n";
}

HfGpt2Config parse_hf_gpt2_config_json(const std::string& text, const std::string& path) {
  const std::string what = "GPT-2 config " + path;
  const JsonScalars j(text, what);
  auto flag = [&](const char* key, bool fallback) {
    if (!j.contains(key)) return fallback;
    const std::string v = j.show(key);
    if (v != "true" && v != "false") throw Error(what + ": '" + key + "' is not a boolean");
    return v == "true";
  };
  auto refuse = [&](const std::string& why) { throw Error(what + ": " + why); };

  if (!j.contains("model_type")) refuse("has no 'model_type' (expected \"gpt2\")");
  if (j.text("model_type") != "gpt2")
    refuse("model_type is '" + j.text("model_type") + "'; mgt-ckpt-convert reads GPT-2 models only");
  if (!flag("tie_word_embeddings", true))
    refuse("tie_word_embeddings is false; mgt reads GPT-2 with its output layer tied to the word embedding");
  if (!flag("scale_attn_weights", true)) refuse("scale_attn_weights is false; mgt scales attention by 1/sqrt(head_dim)");
  if (flag("scale_attn_by_inverse_layer_idx", false))
    refuse("scale_attn_by_inverse_layer_idx is true; mgt does not scale attention per layer");
  if (flag("add_cross_attention", false)) refuse("add_cross_attention is true; mgt has no cross-attention");

  HfGpt2Config hf;
  auto integer = [&](const char* key, std::int64_t& field) {
    if (j.contains(key)) field = j.integer(key);
  };
  auto real = [&](const char* key, double& field) {
    if (j.contains(key)) field = j.real(key);
  };
  integer("vocab_size", hf.vocab_size);
  integer("n_positions", hf.n_positions);
  integer("n_embd", hf.n_embd);
  integer("n_layer", hf.n_layer);
  integer("n_head", hf.n_head);
  if (j.contains("n_inner") && j.show("n_inner") != "null") hf.n_inner = j.integer("n_inner");
  if (j.contains("activation_function")) hf.activation_function = j.text("activation_function");
  real("resid_pdrop", hf.resid_pdrop);
  real("embd_pdrop", hf.embd_pdrop);
  real("attn_pdrop", hf.attn_pdrop);
  real("layer_norm_epsilon", hf.layer_norm_epsilon);
  real("initializer_range", hf.initializer_range);
  if (j.contains("bos_token_id") && j.show("bos_token_id") != "null") hf.bos_token_id = j.integer("bos_token_id");
  if (j.contains("eos_token_id") && j.show("eos_token_id") != "null") hf.eos_token_id = j.integer("eos_token_id");
  if (j.contains("torch_dtype") && j.show("torch_dtype") != "null") hf.torch_dtype = j.text("torch_dtype");

  if (!is_erf_gelu(hf.activation_function) && !is_tanh_gelu(hf.activation_function) &&
      !is_squared_relu(hf.activation_function))
    refuse("activation_function '" + hf.activation_function +
           "' is not one mgt computes (gelu, the tanh form gelu_new / gelu_pytorch_tanh / gelu_fast, or relu2)");
  // Each value is judged under its own key here, before mgt's model configuration would judge
  // it under the command-line flag it becomes (n_layer is --num-layers there).
  for (auto [key, value] : {std::pair<const char*, std::int64_t>{"vocab_size", hf.vocab_size},
                            {"n_positions", hf.n_positions}, {"n_embd", hf.n_embd},
                            {"n_layer", hf.n_layer}, {"n_head", hf.n_head}})
    if (value <= 0 || value > kMaxDimension)
      refuse(std::string(key) + " must be between 1 and " + str(kMaxDimension) + " (got " + str(value) + ")");
  if (hf.n_inner && (*hf.n_inner <= 0 || *hf.n_inner > kMaxDimension))
    refuse("n_inner must be null or between 1 and " + str(kMaxDimension) + " (got " + str(*hf.n_inner) + ")");
  for (auto [key, value] : {std::pair<const char*, double>{"resid_pdrop", hf.resid_pdrop},
                            {"embd_pdrop", hf.embd_pdrop}, {"attn_pdrop", hf.attn_pdrop}})
    if (!(value >= 0.0 && value < 1.0)) refuse(std::string(key) + " must be in [0, 1) (got " + real_text(value) + ")");
  for (auto [key, value] : {std::pair<const char*, double>{"layer_norm_epsilon", hf.layer_norm_epsilon},
                            {"initializer_range", hf.initializer_range}})
    if (!(value > 0.0 && std::isfinite(value)))
      refuse(std::string(key) + " must be a positive number (got " + real_text(value) + ")");
  if (hf.n_embd % hf.n_head != 0)
    refuse("n_embd (" + str(hf.n_embd) + ") is not divisible by n_head (" + str(hf.n_head) + ")");
  return hf;
}

}  // namespace mgt
