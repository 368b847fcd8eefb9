#include "ckpt/hf_llama_config.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/json_wide_integers.hpp"
#include "data/python_json.hpp"

namespace mgt {

bool hf_has_mistral_fields(const std::string& model_type) {
  return model_type == kHfMistralModelType || model_type == kHfMixtralModelType;
}

bool hf_has_qk_norms(const std::string& model_type) {
  return model_type == kHfQwen3ModelType || model_type == kHfQwen3MoeModelType;
}

bool hf_has_qwen_sparse_blocks(const std::string& model_type) {
  return model_type == kHfQwen2MoeModelType || model_type == kHfQwen3MoeModelType;
}

std::string hf_llama_family_name(const std::string& model_type) {
  if (model_type == kHfMistralModelType) return "Mistral";
  if (model_type == kHfMixtralModelType) return "Mixtral";
  if (model_type == kHfQwen2MoeModelType) return "Qwen2Moe";
  if (model_type == kHfQwen3ModelType) return "Qwen3";
  if (model_type == kHfQwen3MoeModelType) return "Qwen3Moe";
  return "Llama";
}

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

// The largest model dimension config.json may give, as for GPT-2 (hf_gpt2_config.cpp).
constexpr std::int64_t kMaxDimension = 2147483647;

bool is_mistral(const std::string& model_type) { return hf_has_mistral_fields(model_type); }
bool is_mixtral(const std::string& model_type) { return model_type == kHfMixtralModelType; }
bool is_qwen2_moe(const std::string& model_type) { return model_type == kHfQwen2MoeModelType; }
bool is_qwen3(const std::string& model_type) { return hf_has_qk_norms(model_type); }  // qwen3 or qwen3_moe
bool is_qwen3_moe(const std::string& model_type) { return model_type == kHfQwen3MoeModelType; }
std::string family_name(const std::string& model_type) { return hf_llama_family_name(model_type); }
std::string architecture_of(const std::string& model_type) { return family_name(model_type) + "ForCausalLM"; }

// What Mixtral's sparse blocks compute against an MoE configuration: every layer a mixture of
// routed experts, chosen and weighted as MixtralSparseMoeBlock does, none dropped.
void require_mixtral_experts(const GptConfig& c, const std::function<void(const std::string&)>& refuse) {
  const MoeConfig& m = c.moe;
  if (!m.enabled()) refuse("a dense MLP (every Mixtral layer is a mixture of experts: --num-experts)");
  if (m.num_moe_layers() != c.num_layers)
    refuse("--moe-layer-freq with dense layers (every Mixtral layer is a mixture of experts)");
  if (m.shared_expert_intermediate_size > 0)
    refuse("--moe-shared-expert-intermediate-size (Mixtral has no shared expert)");
  if (m.score_function != MoeScoreFunction::kSoftmax)
    refuse("--moe-router-score-function " + std::string(to_string(m.score_function)) +
           " (Mixtral's router takes the softmax)");
  if (m.pre_softmax)
    refuse("--moe-router-pre-softmax (Mixtral renormalises the chosen experts' probabilities to sum to 1)");
  if (m.group_topk > 0) refuse("--moe-router-group-topk (Mixtral chooses among all experts)");
  if (m.topk_scaling_factor != 0.0) refuse("--moe-router-topk-scaling-factor (Mixtral does not scale the weights)");
  if (m.enable_expert_bias) refuse("--moe-router-enable-expert-bias (Mixtral's router has no expert bias)");
  if (m.drops_tokens()) refuse("--moe-expert-capacity-factor (Mixtral drops no tokens)");
  if (m.input_jitter_eps != 0.0)
    refuse("--moe-input-jitter-eps (Mixtral's router_jitter_noise multiplies the experts' input too, not the "
           "router's alone)");
  if (m.apply_probs_on_input) refuse("--moe-apply-probs-on-input (Mixtral weights the experts' outputs)");
  if (m.load_balancing == MoeLoadBalancing::kSinkhorn)
    refuse("--moe-router-load-balancing-type sinkhorn (Mixtral renormalises the chosen experts' softmax)");
}

// What Qwen2MoeSparseMoeBlock (and Qwen3MoeSparseMoeBlock) computes against an MoE configuration:
// routed experts chosen from the softmax over all of them (renormalised or not), none dropped,
// and for Qwen2-MoE a gated shared expert, for Qwen3-MoE none.
void require_qwen_moe_experts(const GptConfig& c, const std::string& model_type,
                              const std::function<void(const std::string&)>& refuse) {
  const MoeConfig& m = c.moe;
  const bool qwen2 = is_qwen2_moe(model_type);
  const std::string name = qwen2 ? "Qwen2-MoE" : "Qwen3-MoE";
  if (!m.enabled() || m.num_moe_layers() == 0)
    refuse("a model without MoE layers (" + name + " has sparse blocks: --num-experts" +
           (qwen2 ? ")" : "; a dense Qwen3 is qwen3)"));
  if (qwen2 && m.shared_expert_intermediate_size <= 0)
    refuse("no --moe-shared-expert-intermediate-size (every Qwen2-MoE sparse block has a shared expert)");
  if (qwen2 && !m.shared_expert_gate)
    refuse("no --moe-shared-expert-gate (Qwen2-MoE scales its shared expert's output by a sigmoid gate)");
  if (!qwen2 && m.shared_expert_intermediate_size > 0)
    refuse("--moe-shared-expert-intermediate-size (Qwen3-MoE has no shared expert)");
  if (m.score_function != MoeScoreFunction::kSoftmax)
    refuse("--moe-router-score-function " + std::string(to_string(m.score_function)) + " (" + name +
           "'s router takes the softmax)");
  if (m.group_topk > 0) refuse("--moe-router-group-topk (" + name + " chooses among all experts)");
  if (m.topk_scaling_factor != 0.0) refuse("--moe-router-topk-scaling-factor (" + name + " does not scale the weights)");
  if (m.enable_expert_bias) refuse("--moe-router-enable-expert-bias (" + name + "'s router has no expert bias)");
  if (m.drops_tokens()) refuse("--moe-expert-capacity-factor (" + name + " drops no tokens)");
  if (m.input_jitter_eps != 0.0) refuse("--moe-input-jitter-eps (" + name + "'s router has no jitter)");
  if (m.apply_probs_on_input) refuse("--moe-apply-probs-on-input (" + name + " weights the experts' outputs)");
  if (m.load_balancing == MoeLoadBalancing::kSinkhorn)
    refuse("--moe-router-load-balancing-type sinkhorn (" + name + "'s experts are the top-k of its softmax" +
           (qwen2 ? ", recorded as --moe-router-pre-softmax)" : ")"));
}

// config.json's fields by key, each judged under its own name.
class ConfigFields {
public:
  // An integer wider than 64 bits (Python writes any int) reads as a double.
  ConfigFields(const std::string& text, std::string what)
      : text_(json_with_wide_integers_as_reals(text)), what_(std::move(what)) {
    simdjson::dom::element root;
    if (auto error = parser_.parse(text_).get(root))
      fail(std::string("is not valid JSON (") + simdjson::error_message(error) + ")");
    if (root.get(object_)) fail("is not a JSON object");
  }

  [[noreturn]] void fail(const std::string& why) const { throw Error(what_ + ": " + why); }

  // Absent and null are alike: transformers takes its default for both.
  bool has(const char* key) const {
    simdjson::dom::element v;
    return !object_[key].get(v) && !v.is_null();
  }
  std::optional<simdjson::dom::element> element(const char* key) const {
    simdjson::dom::element v;
    if (object_[key].get(v) || v.is_null()) return std::nullopt;
    return v;
  }

  std::int64_t integer(const char* key) const {
    const auto v = element(key);
    if (!v) fail("has no '" + std::string(key) + "'");
    std::int64_t i;
    if (v->get(i)) fail("'" + std::string(key) + "' is not an integer");
    return i;
  }
  void integer(const char* key, std::int64_t& field) const {
    if (has(key)) field = integer(key);
  }
  void real(const char* key, double& field) const {
    const auto v = element(key);
    if (v && v->get(field)) fail("'" + std::string(key) + "' is not a number");
  }
  // A list of integers (absent or null: left as it is).
  void integer_list(const char* key, std::vector<std::int64_t>& field) const {
    const auto v = element(key);
    if (!v) return;
    simdjson::dom::array a;
    if (v->get(a)) fail("'" + std::string(key) + "' is not a list");
    field.clear();
    for (simdjson::dom::element e : a) {
      std::int64_t i;
      if (e.get(i)) fail("'" + std::string(key) + "' holds something other than integers");
      field.push_back(i);
    }
  }
  void boolean(const char* key, bool& field) const {
    const auto v = element(key);
    if (v && v->get(field)) fail("'" + std::string(key) + "' is not a boolean");
  }
  std::string text(const char* key) const {
    const auto v = element(key);
    std::string_view s;
    if (!v || v->get(s)) fail("has no string '" + std::string(key) + "'");
    return std::string(s);
  }
  // The rope type an object such as rope_scaling names ("rope_type", or the older "type").
  std::string rope_type(const char* key) const {
    simdjson::dom::object o;
    if (element(key)->get(o)) fail("'" + std::string(key) + "' is not an object");
    std::string_view type;
    if (!o["rope_type"].get(type) || !o["type"].get(type)) return std::string(type);
    fail("'" + std::string(key) + "' names no rope_type");
  }
  double nested_real(const char* key, const char* inner) const {
    simdjson::dom::object o;
    if (element(key)->get(o)) fail("'" + std::string(key) + "' is not an object");
    double d;
    if (o[inner].get(d)) fail("'" + std::string(key) + "' has no number '" + inner + "'");
    return d;
  }
  bool nested_has(const char* key, const char* inner) const {
    simdjson::dom::object o;
    simdjson::dom::element v;
    return !element(key)->get(o) && !o[inner].get(v) && !v.is_null();
  }

private:
  simdjson::padded_string text_;
  std::string what_;
  simdjson::dom::parser parser_;
  simdjson::dom::object object_;
};

}  // namespace

void require_llama_expressible(const GptConfig& config, const std::string& model_type, const std::string& what) {
  const GptConfig c = config.resolved();
  const std::string family = family_name(model_type);
  auto refuse = [&](const std::string& why) { throw Error(what + " cannot be expressed as " + family + ": " + why); };
  if (c.position_embedding_type != PositionEmbeddingType::kRope)
    refuse("--position-embedding-type " + std::string(to_string(c.position_embedding_type)) + " (" + family +
           " uses rotary position embeddings)");
  if (c.rotary_percent != 1.0)
    refuse("--rotary-percent " + python_float_repr(c.rotary_percent) + " (" + family + " rotates whole heads)");
  if (c.normalization != Normalization::kRmsNorm)
    refuse("--normalization " + std::string(to_string(c.normalization)) + " (" + family + " uses RMSNorm)");
  if (c.layernorm_zero_centered_gamma)
    refuse("--apply-layernorm-1p (" + family + "'s RMSNorm scales by its weight, not by 1 + weight)");
  if (c.qk_layernorm && !is_qwen3(model_type))
    refuse("--qk-layernorm (" + family + "'s attention has no query and key norms; Qwen3's has: write it as " +
           (c.moe.enabled() ? "qwen3_moe)" : "qwen3)"));
  if (!c.qk_layernorm && is_qwen3(model_type))
    refuse("no --qk-layernorm (" + family + " normalises each query and key head)");
  if ((c.add_bias_linear || c.add_qkv_bias) && is_qwen3(model_type))
    refuse("biases on linear layers (" + family + "'s have none)");
  if (c.activation != Activation::kSwiglu)
    refuse("an MLP without --swiglu (" + family + "'s MLP is silu(gate) · up, then down)");
  if (c.add_bias_linear && is_mistral(model_type))
    refuse("biases on the linear layers (no --disable-bias-linear; Mistral's linear layers have none)");
  if (c.add_bias_linear && is_qwen2_moe(model_type))
    refuse("biases on all linear layers (no --disable-bias-linear; Qwen2-MoE has them on q, k and v only: "
           "--add-qkv-bias)");
  if (c.add_qkv_bias && !c.add_bias_linear && !is_qwen2_moe(model_type))
    refuse("--add-qkv-bias (" + family + " has biases on all the linear layers or on none)");
  if (c.use_rope_scaling && is_qwen2_moe(model_type))
    refuse("--use-rope-scaling (Llama 3.1's frequency scaling; write it as llama instead)");
  if (c.use_rope_scaling && (is_mistral(model_type) || is_qwen3(model_type)))
    refuse("--use-rope-scaling (Llama 3.1's frequency scaling; write it as llama instead)");
  if (is_mixtral(model_type)) require_mixtral_experts(c, refuse);
  else if (hf_has_qwen_sparse_blocks(model_type)) require_qwen_moe_experts(c, model_type, refuse);
  else if (c.moe.enabled())
    refuse("--num-experts " + str(c.moe.num_experts) + " (" + family + "'s MLP is dense; write it as " +
           (is_qwen3(model_type) ? "qwen3_moe)" : "mixtral)"));
}

HfLlamaConfig hf_llama_config_of(const GptConfig& config, const std::string& model_type, std::int64_t vocab_rows,
                                 std::optional<std::int64_t> bos, std::optional<std::int64_t> eos,
                                 const std::string& torch_dtype) {
  const GptConfig c = config.resolved();
  HfLlamaConfig hf;
  hf.model_type = model_type;
  hf.vocab_size = vocab_rows;
  hf.hidden_size = c.hidden_size;
  hf.intermediate_size = c.ffn_hidden_size;
  hf.num_hidden_layers = c.num_layers;
  hf.num_attention_heads = c.num_attention_heads;
  hf.num_key_value_heads = c.query_groups();
  hf.head_dim = c.kv_channels;
  hf.max_position_embeddings = c.max_position_embeddings;
  hf.rms_norm_eps = c.norm_epsilon;
  hf.rope_theta = c.rotary_base;
  if (c.use_rope_scaling) hf.llama3_rope_factor = c.rope_scaling_factor;
  hf.tie_word_embeddings = !c.untie_embeddings_and_output_weights;
  hf.attention_bias = c.add_bias_linear;
  hf.mlp_bias = c.add_bias_linear;
  hf.attention_dropout = c.attention_dropout;
  hf.initializer_range = c.init_method_std;
  hf.bos_token_id = bos;
  hf.eos_token_id = eos;
  hf.torch_dtype = torch_dtype;
  if (is_mixtral(model_type) && c.moe.enabled()) {
    hf.intermediate_size = c.moe.ffn_hidden_size;
    hf.num_local_experts = c.moe.num_experts;
    hf.num_experts_per_tok = c.moe.topk;
    hf.router_aux_loss_coef = c.moe.load_balancing == MoeLoadBalancing::kNone ? 0.0 : c.moe.aux_loss_coeff;
  }
  if (hf_has_qwen_sparse_blocks(model_type) && c.moe.enabled()) {
    if (is_qwen2_moe(model_type)) {
      hf.qkv_bias = c.add_qkv_bias;
      hf.shared_expert_intermediate_size = c.moe.shared_expert_intermediate_size;
    }
    hf.attention_bias = hf.mlp_bias = false;
    hf.num_local_experts = c.moe.num_experts;
    hf.num_experts_per_tok = c.moe.topk;
    hf.moe_intermediate_size = c.moe.ffn_hidden_size;
    hf.norm_topk_prob = !c.moe.pre_softmax;
    hf.router_aux_loss_coef = c.moe.load_balancing == MoeLoadBalancing::kNone ? 0.0 : c.moe.aux_loss_coeff;
    // Every layer a sparse block but the dense ones, named.
    hf.decoder_sparse_step = 1;
    for (std::int64_t l = 0; l < c.num_layers; ++l)
      if (!c.moe.is_moe_layer(l)) hf.mlp_only_layers.push_back(l);
    hf.max_window_layers = c.num_layers;
  }
  if (is_qwen3(model_type)) {
    hf.attention_bias = hf.mlp_bias = false;
    hf.max_window_layers = c.num_layers;
  }
  return hf;
}

GptConfig gpt_config_of(const HfLlamaConfig& hf, std::int64_t seq_length, std::int64_t padded_vocab_size) {
  GptConfig c;
  c.num_layers = hf.num_hidden_layers;
  c.hidden_size = hf.hidden_size;
  c.num_attention_heads = hf.num_attention_heads;
  c.group_query_attention = hf.num_key_value_heads != hf.num_attention_heads;
  c.num_query_groups = c.group_query_attention ? hf.num_key_value_heads : 1;
  c.kv_channels = hf.head_dim;
  c.ffn_hidden_size = hf.intermediate_size;
  c.seq_length = seq_length;
  c.max_position_embeddings = hf.max_position_embeddings;
  c.position_embedding_type = PositionEmbeddingType::kRope;
  c.rotary_percent = 1.0;
  c.rotary_base = hf.rope_theta;
  c.use_rope_scaling = hf.llama3_rope_factor.has_value();
  if (hf.llama3_rope_factor) c.rope_scaling_factor = *hf.llama3_rope_factor;
  c.normalization = Normalization::kRmsNorm;
  c.norm_epsilon = hf.rms_norm_eps;
  c.activation = Activation::kSwiglu;
  c.add_bias_linear = hf.attention_bias;
  if (is_qwen2_moe(hf.model_type)) {
    c.add_bias_linear = false;
    c.add_qkv_bias = hf.qkv_bias;
  }
  c.qk_layernorm = is_qwen3(hf.model_type);
  c.untie_embeddings_and_output_weights = !hf.tie_word_embeddings;
  c.hidden_dropout = 0.0;
  c.attention_dropout = hf.attention_dropout;
  c.init_method_std = hf.initializer_range;
  c.padded_vocab_size = padded_vocab_size;
  if (hf.num_local_experts > 0) {
    // Megatron's default routing is Mixtral's (hf_llama_config.hpp); the rest of MoeConfig's
    // defaults are Megatron's too: aux_loss load balancing, dropless, the allgather dispatcher.
    c.moe.num_experts = hf.num_local_experts;
    c.moe.layer_pattern.assign(static_cast<std::size_t>(hf.num_hidden_layers), true);
    c.moe.ffn_hidden_size = hf.intermediate_size;
    c.moe.topk = hf.num_experts_per_tok;
    c.moe.aux_loss_coeff = hf.router_aux_loss_coef;
  }
  if (hf_has_qwen_sparse_blocks(hf.model_type)) {
    // Qwen2MoeDecoderLayer's (and Qwen3MoeDecoderLayer's) choice of a sparse block, as a
    // --moe-layer-freq pattern.
    for (std::int64_t l = 0; l < hf.num_hidden_layers; ++l)
      c.moe.layer_pattern[static_cast<std::size_t>(l)] =
          (l + 1) % hf.decoder_sparse_step == 0 &&
          std::find(hf.mlp_only_layers.begin(), hf.mlp_only_layers.end(), l) == hf.mlp_only_layers.end();
    c.moe.ffn_hidden_size = hf.moe_intermediate_size;
    c.moe.pre_softmax = !hf.norm_topk_prob;
    if (is_qwen2_moe(hf.model_type)) {
      c.moe.shared_expert_intermediate_size = hf.shared_expert_intermediate_size;
      c.moe.shared_expert_gate = true;
    }
  }
  return c.resolved();
}

namespace {

// Qwen2MoeConfig's, Qwen3Config's or Qwen3MoeConfig's config.json (keys sorted).
std::string hf_qwen_config_json(const HfLlamaConfig& hf) {
  const bool sparse = hf_has_qwen_sparse_blocks(hf.model_type);
  const bool qwen2_moe = is_qwen2_moe(hf.model_type);
  auto token = [&](std::optional<std::int64_t> id) {
    return id && *id >= 0 && *id < hf.vocab_size ? PyValue::integer(*id) : PyValue::none();
  };
  std::vector<PyValue> dense;
  for (std::int64_t l : hf.mlp_only_layers) dense.push_back(PyValue::integer(l));
  PyValue j = PyValue::dict();
  j.set("architectures", PyValue::list({PyValue::string(architecture_of(hf.model_type))}));
  if (is_qwen3(hf.model_type)) j.set("attention_bias", PyValue::boolean(false));
  j.set("attention_dropout", PyValue::real(hf.attention_dropout));
  j.set("bos_token_id", token(hf.bos_token_id));
  if (sparse) j.set("decoder_sparse_step", PyValue::integer(hf.decoder_sparse_step));
  j.set("eos_token_id", token(hf.eos_token_id));
  j.set("head_dim", PyValue::integer(hf.head_dim));
  j.set("hidden_act", PyValue::string("silu"));
  j.set("hidden_size", PyValue::integer(hf.hidden_size));
  j.set("initializer_range", PyValue::real(hf.initializer_range));
  j.set("intermediate_size", PyValue::integer(hf.intermediate_size));
  j.set("max_position_embeddings", PyValue::integer(hf.max_position_embeddings));
  if (!is_qwen3_moe(hf.model_type)) j.set("max_window_layers", PyValue::integer(hf.max_window_layers));
  if (sparse) j.set("mlp_only_layers", PyValue::list(std::move(dense)));
  j.set("model_type", PyValue::string(hf.model_type));
  if (sparse) {
    j.set("moe_intermediate_size", PyValue::integer(hf.moe_intermediate_size));
    j.set("norm_topk_prob", PyValue::boolean(hf.norm_topk_prob));
  }
  j.set("num_attention_heads", PyValue::integer(hf.num_attention_heads));
  if (sparse) {
    j.set("num_experts", PyValue::integer(hf.num_local_experts));
    j.set("num_experts_per_tok", PyValue::integer(hf.num_experts_per_tok));
  }
  j.set("num_hidden_layers", PyValue::integer(hf.num_hidden_layers));
  j.set("num_key_value_heads", PyValue::integer(hf.num_key_value_heads));
  if (sparse) j.set("output_router_logits", PyValue::boolean(hf.output_router_logits));
  if (qwen2_moe) j.set("qkv_bias", PyValue::boolean(hf.qkv_bias));
  j.set("rms_norm_eps", PyValue::real(hf.rms_norm_eps));
  j.set("rope_scaling", PyValue::none());
  j.set("rope_theta", PyValue::real(hf.rope_theta));
  if (sparse) j.set("router_aux_loss_coef", PyValue::real(hf.router_aux_loss_coef));
  if (qwen2_moe)
    j.set("shared_expert_intermediate_size", PyValue::integer(hf.shared_expert_intermediate_size));
  j.set("sliding_window", PyValue::none());
  j.set("tie_word_embeddings", PyValue::boolean(hf.tie_word_embeddings));
  j.set("torch_dtype", PyValue::string(hf.torch_dtype));
  j.set("use_cache", PyValue::boolean(true));
  j.set("use_sliding_window", PyValue::boolean(false));
  j.set("vocab_size", PyValue::integer(hf.vocab_size));
  return j.dumps() + "\n";
}

}  // namespace

std::string hf_llama_config_json(const HfLlamaConfig& hf) {
  if (is_qwen2_moe(hf.model_type) || is_qwen3(hf.model_type)) return hf_qwen_config_json(hf);
  const bool mistral = is_mistral(hf.model_type);
  const bool mixtral = is_mixtral(hf.model_type);
  // An id outside the vocabulary would make transformers warn; unknown ids are null.
  auto token = [&](std::optional<std::int64_t> id) {
    return id && *id >= 0 && *id < hf.vocab_size ? PyValue::integer(*id) : PyValue::none();
  };
  // Keys in sorted order, as PretrainedConfig.to_json_string writes them.
  PyValue j = PyValue::dict();
  j.set("architectures", PyValue::list({PyValue::string(architecture_of(hf.model_type))}));
  if (!mistral) j.set("attention_bias", PyValue::boolean(hf.attention_bias));
  j.set("attention_dropout", PyValue::real(hf.attention_dropout));
  j.set("bos_token_id", token(hf.bos_token_id));
  j.set("eos_token_id", token(hf.eos_token_id));
  j.set("head_dim", PyValue::integer(hf.head_dim));
  j.set("hidden_act", PyValue::string("silu"));
  j.set("hidden_size", PyValue::integer(hf.hidden_size));
  j.set("initializer_range", PyValue::real(hf.initializer_range));
  j.set("intermediate_size", PyValue::integer(hf.intermediate_size));
  j.set("max_position_embeddings", PyValue::integer(hf.max_position_embeddings));
  if (!mistral) j.set("mlp_bias", PyValue::boolean(hf.mlp_bias));
  j.set("model_type", PyValue::string(hf.model_type));
  j.set("num_attention_heads", PyValue::integer(hf.num_attention_heads));
  if (mixtral) j.set("num_experts_per_tok", PyValue::integer(hf.num_experts_per_tok));
  j.set("num_hidden_layers", PyValue::integer(hf.num_hidden_layers));
  j.set("num_key_value_heads", PyValue::integer(hf.num_key_value_heads));
  if (mixtral) {
    j.set("num_local_experts", PyValue::integer(hf.num_local_experts));
    j.set("output_router_logits", PyValue::boolean(hf.output_router_logits));
  }
  if (!mistral) j.set("pretraining_tp", PyValue::integer(1));
  j.set("rms_norm_eps", PyValue::real(hf.rms_norm_eps));
  if (!mistral) {
    if (hf.llama3_rope_factor) {
      // Llama 3.1's config.json, in the transformers 4 layout that transformers 5 reads too.
      PyValue scaling = PyValue::dict();
      scaling.set("factor", PyValue::real(*hf.llama3_rope_factor));
      scaling.set("high_freq_factor", PyValue::real(4.0));
      scaling.set("low_freq_factor", PyValue::real(1.0));
      scaling.set("original_max_position_embeddings", PyValue::integer(8192));
      scaling.set("rope_type", PyValue::string("llama3"));
      j.set("rope_scaling", scaling);
    } else {
      j.set("rope_scaling", PyValue::none());
    }
  }
  j.set("rope_theta", PyValue::real(hf.rope_theta));
  if (mixtral) {
    j.set("router_aux_loss_coef", PyValue::real(hf.router_aux_loss_coef));
    j.set("router_jitter_noise", PyValue::real(0.0));
  }
  if (mistral) j.set("sliding_window", hf.sliding_window ? PyValue::integer(*hf.sliding_window) : PyValue::none());
  j.set("tie_word_embeddings", PyValue::boolean(hf.tie_word_embeddings));
  j.set("torch_dtype", PyValue::string(hf.torch_dtype));
  j.set("use_cache", PyValue::boolean(true));
  j.set("vocab_size", PyValue::integer(hf.vocab_size));
  return j.dumps() + "\n";
}

HfLlamaConfig parse_hf_llama_config_json(const std::string& text, const std::string& path) {
  const ConfigFields j(text, "config " + path);
  HfLlamaConfig hf;
  hf.model_type = j.text("model_type");
  const bool mistral = is_mistral(hf.model_type);
  const bool mixtral = is_mixtral(hf.model_type);
  const bool qwen2_moe = is_qwen2_moe(hf.model_type);
  const bool qwen3 = is_qwen3(hf.model_type);
  const bool qwen3_moe = is_qwen3_moe(hf.model_type);
  if (hf.model_type != kHfLlamaModelType && !mistral && !qwen2_moe && !qwen3)
    j.fail("model_type is '" + hf.model_type + "', not llama, mistral, mixtral, qwen2_moe, qwen3 or qwen3_moe");
  if (mixtral) {  // MixtralConfig's defaults where they differ from LlamaConfig's
    hf.rms_norm_eps = 1e-5;
    hf.rope_theta = 1e6;
  }
  if (qwen2_moe || qwen3) hf.max_position_embeddings = 32768;  // Qwen2MoeConfig's, Qwen3Config's
  auto refuse = [&](const std::string& why) { j.fail(why); };

  hf.vocab_size = j.integer("vocab_size");
  hf.hidden_size = j.integer("hidden_size");
  hf.intermediate_size = j.integer("intermediate_size");
  hf.num_hidden_layers = j.integer("num_hidden_layers");
  hf.num_attention_heads = j.integer("num_attention_heads");
  hf.num_key_value_heads = hf.num_attention_heads;
  j.integer("num_key_value_heads", hf.num_key_value_heads);
  if (mistral) hf.max_position_embeddings = 4096 * 32;
  j.integer("max_position_embeddings", hf.max_position_embeddings);
  j.real("rms_norm_eps", hf.rms_norm_eps);
  j.real("rope_theta", hf.rope_theta);
  j.boolean("tie_word_embeddings", hf.tie_word_embeddings);
  if (!mistral && !qwen2_moe && !qwen3) {  // MistralConfig has neither: its linear layers never have biases
    j.boolean("attention_bias", hf.attention_bias);
    j.boolean("mlp_bias", hf.mlp_bias);
  }
  if (qwen3) {
    bool attention_bias = false;
    j.boolean("attention_bias", attention_bias);
    if (attention_bias)
      refuse("attention_bias is true: Qwen3's q, k, v and o biases without the MLP's have no Megatron flags");
  }
  j.real("attention_dropout", hf.attention_dropout);
  j.real("initializer_range", hf.initializer_range);
  hf.bos_token_id = j.has("bos_token_id") ? std::optional(j.integer("bos_token_id")) : std::nullopt;
  hf.eos_token_id = j.has("eos_token_id") ? std::optional(j.integer("eos_token_id")) : std::nullopt;
  if (j.has("torch_dtype")) hf.torch_dtype = j.text("torch_dtype");
  if (mixtral) {
    hf.num_local_experts = 8;  // MixtralConfig's defaults
    j.integer("num_local_experts", hf.num_local_experts);
    j.integer("num_experts_per_tok", hf.num_experts_per_tok);
    j.real("router_aux_loss_coef", hf.router_aux_loss_coef);
    j.boolean("output_router_logits", hf.output_router_logits);
    if (hf.num_local_experts < 1 || hf.num_local_experts > kMaxDimension)
      refuse("num_local_experts must be between 1 and " + str(kMaxDimension) + " (got " + str(hf.num_local_experts) +
             ")");
    if (hf.num_experts_per_tok < 1 || hf.num_experts_per_tok > hf.num_local_experts)
      refuse("num_experts_per_tok must be between 1 and num_local_experts (" + str(hf.num_local_experts) +
             ") (got " + str(hf.num_experts_per_tok) + ")");
    double jitter = 0.0;
    j.real("router_jitter_noise", jitter);
    if (jitter != 0.0)
      refuse("router_jitter_noise " + python_float_repr(jitter) + " is not 0: Mixtral's jitter multiplies the "
             "hidden states both the router and the experts take, mgt's --moe-input-jitter-eps the router's input "
             "alone");
    if (!(hf.router_aux_loss_coef >= 0.0 && std::isfinite(hf.router_aux_loss_coef)))
      refuse("router_aux_loss_coef must be a number >= 0 (got " + python_float_repr(hf.router_aux_loss_coef) + ")");
  }

  // Qwen's use_sliding_window: mgt has no sliding-window attention.
  auto refuse_sliding_window = [&] {
    bool sliding = false;
    j.boolean("use_sliding_window", sliding);
    if (sliding && j.has("sliding_window") && j.integer("sliding_window") < hf.max_position_embeddings)
      refuse("use_sliding_window is true with sliding_window " + str(j.integer("sliding_window")) +
             " shorter than max_position_embeddings (" + str(hf.max_position_embeddings) +
             "): mgt has no sliding-window attention");
  };
  if (qwen2_moe || qwen3_moe) {  // Qwen2MoeConfig's (or Qwen3MoeConfig's) defaults, then the file's values
    hf.num_local_experts = qwen3_moe ? 128 : 60;
    hf.num_experts_per_tok = qwen3_moe ? 8 : 4;
    hf.moe_intermediate_size = qwen3_moe ? 768 : 1408;
    hf.shared_expert_intermediate_size = qwen3_moe ? 0 : 5632;
    if (qwen3_moe) hf.qkv_bias = false;
    if (qwen2_moe) j.boolean("qkv_bias", hf.qkv_bias);  // transformers 4 has no field: always biased
    // transformers 5 writes Qwen3-MoE's num_experts under its attribute name, num_local_experts.
    j.integer("num_experts", hf.num_local_experts);
    j.integer("num_local_experts", hf.num_local_experts);
    j.integer("num_experts_per_tok", hf.num_experts_per_tok);
    j.integer("moe_intermediate_size", hf.moe_intermediate_size);
    if (qwen2_moe) j.integer("shared_expert_intermediate_size", hf.shared_expert_intermediate_size);
    j.boolean("norm_topk_prob", hf.norm_topk_prob);
    j.integer("decoder_sparse_step", hf.decoder_sparse_step);
    j.integer_list("mlp_only_layers", hf.mlp_only_layers);
    j.real("router_aux_loss_coef", hf.router_aux_loss_coef);
    j.boolean("output_router_logits", hf.output_router_logits);
    j.integer("max_window_layers", hf.max_window_layers);
    auto between = [&](const char* key, std::int64_t value, std::int64_t low, std::int64_t high) {
      if (value < low || value > high)
        refuse(std::string(key) + " must be between " + str(low) + " and " + str(high) + " (got " + str(value) + ")");
    };
    between("num_experts", hf.num_local_experts, 1, kMaxDimension);
    between("num_experts_per_tok", hf.num_experts_per_tok, 1, hf.num_local_experts);
    between("moe_intermediate_size", hf.moe_intermediate_size, 1, kMaxDimension);
    if (qwen2_moe) between("shared_expert_intermediate_size", hf.shared_expert_intermediate_size, 1, kMaxDimension);
    between("decoder_sparse_step", hf.decoder_sparse_step, 1, kMaxDimension);
    for (std::int64_t l : hf.mlp_only_layers) between("mlp_only_layers' entry", l, 0, hf.num_hidden_layers - 1);
    bool sparse = false;
    for (std::int64_t l = 0; l < hf.num_hidden_layers; ++l)
      sparse = sparse || ((l + 1) % hf.decoder_sparse_step == 0 &&
                          std::find(hf.mlp_only_layers.begin(), hf.mlp_only_layers.end(), l) ==
                              hf.mlp_only_layers.end());
    if (!sparse)
      refuse("decoder_sparse_step " + str(hf.decoder_sparse_step) + " and mlp_only_layers leave no sparse layer: "
             "mgt reads a " + family_name(hf.model_type) + " model with at least one");
    if (!(hf.router_aux_loss_coef >= 0.0 && std::isfinite(hf.router_aux_loss_coef)))
      refuse("router_aux_loss_coef must be a number >= 0 (got " + python_float_repr(hf.router_aux_loss_coef) + ")");
    refuse_sliding_window();
  }

  if (qwen3 && !qwen3_moe) {
    j.integer("max_window_layers", hf.max_window_layers);
    refuse_sliding_window();
  }

  for (auto [key, value] : {std::pair<const char*, std::int64_t>{"vocab_size", hf.vocab_size},
                            {"hidden_size", hf.hidden_size}, {"intermediate_size", hf.intermediate_size},
                            {"num_hidden_layers", hf.num_hidden_layers},
                            {"num_attention_heads", hf.num_attention_heads},
                            {"num_key_value_heads", hf.num_key_value_heads},
                            {"max_position_embeddings", hf.max_position_embeddings}})
    if (value <= 0 || value > kMaxDimension)
      refuse(std::string(key) + " must be between 1 and " + str(kMaxDimension) + " (got " + str(value) + ")");
  if (hf.num_attention_heads % hf.num_key_value_heads != 0)
    refuse("num_attention_heads (" + str(hf.num_attention_heads) + ") is not divisible by num_key_value_heads (" +
           str(hf.num_key_value_heads) + ")");
  if (j.has("head_dim")) {
    hf.head_dim = j.integer("head_dim");
    if (hf.head_dim <= 0 || hf.head_dim > kMaxDimension || hf.head_dim % 2 != 0)
      refuse("head_dim must be an even number between 2 and " + str(kMaxDimension) + " (got " + str(hf.head_dim) + ")");
  } else if (qwen3 && !qwen3_moe) {
    hf.head_dim = 128;  // Qwen3Config's default
  } else {
    if (hf.hidden_size % hf.num_attention_heads != 0)
      refuse("hidden_size (" + str(hf.hidden_size) + ") is not divisible by num_attention_heads (" +
             str(hf.num_attention_heads) + ") and there is no head_dim");
    hf.head_dim = hf.hidden_size / hf.num_attention_heads;
    if (hf.head_dim % 2 != 0) refuse("the head dimension " + str(hf.head_dim) + " is odd; rotary needs it even");
  }

  if (j.has("hidden_act") && j.text("hidden_act") != "silu" && j.text("hidden_act") != "swish")
    refuse("hidden_act '" + j.text("hidden_act") + "' is not silu, the SwiGLU activation mgt computes");
  // transformers 5 gathers the rotary settings into rope_parameters; earlier versions have
  // rope_theta and rope_scaling. Of the scaled types mgt computes Llama 3.1's (rope_type
  // "llama3"), with the constants Megatron's --use-rope-scaling fixes.
  auto read_scaling = [&](const char* key) {
    const std::string type = j.rope_type(key);
    if (type == "default") return;
    if (type != "llama3")
      refuse(std::string(key) + " of type '" + type + "' is not supported: mgt scales rotary frequencies only "
             "as Llama 3.1 does (rope_type llama3, Megatron's --use-rope-scaling)");
    if (hf.model_type != kHfLlamaModelType)
      refuse(std::string(key) + " of type 'llama3' in a " + family_name(hf.model_type) +
             " config: mgt reads it for Llama only");
    const double factor = j.nested_real(key, "factor");
    if (!(factor > 0.0 && std::isfinite(factor)))
      refuse(std::string(key) + "'s factor must be a positive number (got " + python_float_repr(factor) + ")");
    for (auto [inner, fixed] : {std::pair<const char*, double>{"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                                {"original_max_position_embeddings", 8192.0}})
      if (j.nested_has(key, inner) && j.nested_real(key, inner) != fixed)
        refuse(std::string(key) + "'s " + inner + " is " + python_float_repr(j.nested_real(key, inner)) + ", not " +
               python_float_repr(fixed) + ": Megatron's --use-rope-scaling fixes low_freq_factor 1, "
               "high_freq_factor 4 and original_max_position_embeddings 8192");
    hf.llama3_rope_factor = factor;
  };
  if (j.has("rope_parameters")) {
    read_scaling("rope_parameters");
    hf.rope_theta = j.nested_real("rope_parameters", "rope_theta");
  }
  if (j.has("rope_scaling")) read_scaling("rope_scaling");
  double partial_rotary_factor = 1.0;
  j.real("partial_rotary_factor", partial_rotary_factor);
  if (partial_rotary_factor != 1.0)
    refuse("partial_rotary_factor " + python_float_repr(partial_rotary_factor) + " is not 1: Llama rotates whole heads");
  if (hf.attention_bias != hf.mlp_bias)
    refuse(std::string("attention_bias is ") + (hf.attention_bias ? "true" : "false") + " but mlp_bias is " +
           (hf.mlp_bias ? "true" : "false") + "; mgt's linear layers have biases all together or not at all "
           "(--disable-bias-linear)");
  if (mistral && j.has("sliding_window")) {
    const std::int64_t window = j.integer("sliding_window");
    if (window < hf.max_position_embeddings)
      refuse("sliding_window " + str(window) + " is shorter than max_position_embeddings (" +
             str(hf.max_position_embeddings) + "): mgt has no sliding-window attention (only a window that "
             "covers every position, or null, is read)");
    hf.sliding_window = window;
  }

  for (auto [key, value] : {std::pair<const char*, double>{"rms_norm_eps", hf.rms_norm_eps},
                            {"rope_theta", hf.rope_theta}, {"initializer_range", hf.initializer_range}})
    if (!(value > 0.0 && std::isfinite(value)))
      refuse(std::string(key) + " must be a positive number (got " + python_float_repr(value) + ")");
  if (!(hf.attention_dropout >= 0.0 && hf.attention_dropout < 1.0))
    refuse("attention_dropout must be in [0, 1) (got " + python_float_repr(hf.attention_dropout) + ")");
  return hf;
}

}  // namespace mgt
