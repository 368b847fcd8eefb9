#include "ckpt/model_checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <filesystem>
#include <set>
#include <span>
#include <vector>

#include "ckpt/checkpoint_discovery.hpp"
#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/expert_bias_records.hpp"
#include "ckpt/iteration_save.hpp"
#include "ckpt/sharded_checkpoint.hpp"
#include "ckpt/tensor_paths.hpp"
#include "core/error.hpp"
#include "core/json_scalars.hpp"
#include "core/log.hpp"
#include "data/python_json.hpp"
#include "tokenizer/tokenizer_type_inference.hpp"

namespace mgt {

namespace {

std::optional<std::int64_t> optional_integer(const JsonScalars& args, const std::string& key) {
  if (!args.contains(key) || args.show(key) == "null") return std::nullopt;
  return args.integer(key);
}

bool flag_of(const JsonScalars& args, const std::string& key, bool fallback) {
  if (!args.contains(key)) return fallback;
  const std::string v = args.show(key);
  return v == "true";
}

std::optional<double> optional_real(const JsonScalars& args, const std::string& key) {
  if (!args.contains(key) || args.show(key) == "null") return std::nullopt;
  return args.real(key);
}

// The MoE flags as mgt-train records them (model/moe_options.hpp); nullopt for a dense model.
std::optional<MoeOptions> moe_options_of(const JsonScalars& a) {
  if (optional_integer(a, "num_experts").value_or(0) <= 0) return std::nullopt;
  MoeOptions o;
  o.num_experts = a.integer("num_experts");
  if (a.contains("moe_layer_freq")) {
    // Megatron keeps an integer as an int and a pattern as its list; mgt records the pattern's text.
    const std::string shown = a.show("moe_layer_freq");
    o.moe_layer_freq = !shown.empty() && shown.front() == '"' ? a.text("moe_layer_freq") : shown;
  }
  o.moe_ffn_hidden_size = optional_integer(a, "moe_ffn_hidden_size");
  o.moe_shared_expert_intermediate_size = optional_integer(a, "moe_shared_expert_intermediate_size");
  o.moe_shared_expert_gate = flag_of(a, "moe_shared_expert_gate", false);
  if (a.contains("moe_router_topk")) o.moe_router_topk = a.integer("moe_router_topk");
  for (auto [key, field] : {std::pair{"moe_router_score_function", &o.moe_router_score_function},
                            std::pair{"moe_router_load_balancing_type", &o.moe_router_load_balancing_type},
                            std::pair{"moe_token_drop_policy", &o.moe_token_drop_policy},
                            std::pair{"moe_token_dispatcher_type", &o.moe_token_dispatcher_type}})
    if (a.contains(key)) *field = a.text(key);
  o.moe_router_pre_softmax = flag_of(a, "moe_router_pre_softmax", false);
  if (a.contains("moe_router_dtype") && a.show("moe_router_dtype") != "null")
    o.moe_router_dtype = a.text("moe_router_dtype");
  o.moe_pad_expert_input_to_capacity = flag_of(a, "moe_pad_expert_input_to_capacity", false);
  o.moe_router_num_groups = optional_integer(a, "moe_router_num_groups");
  o.moe_router_group_topk = optional_integer(a, "moe_router_group_topk");
  o.moe_router_topk_scaling_factor = optional_real(a, "moe_router_topk_scaling_factor");
  o.moe_expert_capacity_factor = optional_real(a, "moe_expert_capacity_factor");
  o.moe_aux_loss_coeff = optional_real(a, "moe_aux_loss_coeff").value_or(0.0);
  o.moe_z_loss_coeff = optional_real(a, "moe_z_loss_coeff");
  o.moe_router_enable_expert_bias = flag_of(a, "moe_router_enable_expert_bias", false);
  o.moe_apply_probs_on_input = flag_of(a, "moe_apply_probs_on_input", false);
  return o;
}

}  // namespace

GptConfig gpt_config_from_args_json(const std::string& args_json, const std::string& what) {
  const JsonScalars a(args_json, what);
  GptConfig c;
  c.num_layers = a.integer("num_layers");
  c.hidden_size = a.integer("hidden_size");
  c.num_attention_heads = a.integer("num_attention_heads");
  c.group_query_attention = flag_of(a, "group_query_attention", false);
  if (c.group_query_attention) c.num_query_groups = a.integer("num_query_groups");
  c.kv_channels = optional_integer(a, "kv_channels").value_or(0);
  c.ffn_hidden_size = optional_integer(a, "ffn_hidden_size").value_or(0);
  c.seq_length = a.integer("seq_length");
  c.max_position_embeddings = optional_integer(a, "max_position_embeddings").value_or(0);
  if (a.contains("position_embedding_type"))
    c.position_embedding_type = parse_position_embedding_type(a.text("position_embedding_type"));
  if (a.contains("rotary_percent")) c.rotary_percent = a.real("rotary_percent");
  if (a.contains("rotary_base")) c.rotary_base = a.real("rotary_base");
  c.use_rope_scaling = flag_of(a, "use_rope_scaling", false);
  if (a.contains("rope_scaling_factor")) c.rope_scaling_factor = a.real("rope_scaling_factor");
  if (a.contains("normalization")) c.normalization = parse_normalization(a.text("normalization"));
  if (a.contains("norm_epsilon")) c.norm_epsilon = a.real("norm_epsilon");
  c.layernorm_zero_centered_gamma = flag_of(a, "apply_layernorm_1p", false);
  c.qk_layernorm = flag_of(a, "qk_layernorm", false);
  c.add_bias_linear = flag_of(a, "add_bias_linear", true);
  c.add_qkv_bias = flag_of(a, "add_qkv_bias", false);
  // Arguments without bias_gelu_fusion come from mgt before it followed Megatron's fused
  // bias-GELU: their GELU was the erf form.
  c.activation = mlp_activation(flag_of(a, "swiglu", false), flag_of(a, "squared_relu", false),
                                flag_of(a, "openai_gelu", false), flag_of(a, "bias_gelu_fusion", false),
                                c.add_bias_linear);
  c.untie_embeddings_and_output_weights = flag_of(a, "untie_embeddings_and_output_weights", false);
  if (a.contains("hidden_dropout")) c.hidden_dropout = a.real("hidden_dropout");
  if (a.contains("attention_dropout")) c.attention_dropout = a.real("attention_dropout");
  if (a.contains("init_method_std")) c.init_method_std = a.real("init_method_std");
  c.padded_vocab_size = a.integer("padded_vocab_size");
  try {
    if (const std::optional<MoeOptions> moe = moe_options_of(a)) c.moe = moe_config_from_options(*moe, c.num_layers);
    return c.resolved();
  } catch (const Error& e) {
    throw Error(what + " do not describe a valid model: " + e.what());
  }
}

std::string model_args_json(const GptConfig& config) {
  const GptConfig c = config.resolved();
  PyValue a = PyValue::dict();
  a.set("num_layers", PyValue::integer(c.num_layers));
  a.set("hidden_size", PyValue::integer(c.hidden_size));
  a.set("num_attention_heads", PyValue::integer(c.num_attention_heads));
  a.set("ffn_hidden_size", PyValue::integer(c.ffn_hidden_size));
  a.set("kv_channels", PyValue::integer(c.kv_channels));
  a.set("group_query_attention", PyValue::boolean(c.group_query_attention));
  a.set("num_query_groups", PyValue::integer(c.query_groups()));
  a.set("seq_length", PyValue::integer(c.seq_length));
  a.set("max_position_embeddings", PyValue::integer(c.max_position_embeddings));
  a.set("position_embedding_type", PyValue::string(std::string(to_string(c.position_embedding_type))));
  a.set("rotary_percent", PyValue::real(c.rotary_percent));
  a.set("rotary_base", PyValue::real(c.rotary_base));
  a.set("use_rope_scaling", PyValue::boolean(c.use_rope_scaling));
  a.set("rope_scaling_factor", PyValue::real(c.rope_scaling_factor));
  a.set("normalization", PyValue::string(std::string(to_string(c.normalization))));
  a.set("norm_epsilon", PyValue::real(c.norm_epsilon));
  a.set("apply_layernorm_1p", PyValue::boolean(c.layernorm_zero_centered_gamma));
  a.set("qk_layernorm", PyValue::boolean(c.qk_layernorm));
  a.set("swiglu", PyValue::boolean(c.activation == Activation::kSwiglu));
  a.set("squared_relu", PyValue::boolean(c.activation == Activation::kSquaredRelu));
  a.set("openai_gelu", PyValue::boolean(c.activation == Activation::kOpenaiGelu));
  a.set("add_bias_linear", PyValue::boolean(c.add_bias_linear));
  a.set("add_qkv_bias", PyValue::boolean(c.add_qkv_bias));
  a.set("bias_gelu_fusion", PyValue::boolean(c.activation == Activation::kOpenaiGelu && c.add_bias_linear));
  a.set("untie_embeddings_and_output_weights", PyValue::boolean(c.untie_embeddings_and_output_weights));
  a.set("hidden_dropout", PyValue::real(c.hidden_dropout));
  a.set("attention_dropout", PyValue::real(c.attention_dropout));
  a.set("init_method_std", PyValue::real(c.init_method_std));
  a.set("padded_vocab_size", PyValue::integer(c.padded_vocab_size));
  a.set("tensor_model_parallel_size", PyValue::integer(1));
  a.set("pipeline_model_parallel_size", PyValue::integer(1));
  if (c.moe.enabled()) {
    // The flags' record as mgt-train writes it, for the layers' pattern as a list expression.
    std::string pattern = "[";
    for (std::size_t l = 0; l < c.moe.layer_pattern.size(); ++l) pattern += (l ? "," : "") + std::string(c.moe.layer_pattern[l] ? "1" : "0");
    pattern += "]";
    a.set("num_experts", PyValue::integer(c.moe.num_experts));
    a.set("moe_layer_freq", PyValue::string(pattern));
    a.set("moe_ffn_hidden_size", PyValue::integer(c.moe.ffn_hidden_size));
    if (c.moe.shared_expert_intermediate_size > 0)
      a.set("moe_shared_expert_intermediate_size", PyValue::integer(c.moe.shared_expert_intermediate_size));
    if (c.moe.shared_expert_gate) a.set("moe_shared_expert_gate", PyValue::boolean(true));
    a.set("moe_router_topk", PyValue::integer(c.moe.topk));
    a.set("moe_router_score_function", PyValue::string(std::string(to_string(c.moe.score_function))));
    a.set("moe_router_pre_softmax", PyValue::boolean(c.moe.pre_softmax));
    if (c.moe.router_fp64) a.set("moe_router_dtype", PyValue::string("fp64"));
    if (c.moe.group_topk > 0) {
      a.set("moe_router_num_groups", PyValue::integer(c.moe.num_groups));
      a.set("moe_router_group_topk", PyValue::integer(c.moe.group_topk));
    }
    if (c.moe.topk_scaling_factor != 0.0)
      a.set("moe_router_topk_scaling_factor", PyValue::real(c.moe.topk_scaling_factor));
    if (c.moe.drops_tokens()) a.set("moe_expert_capacity_factor", PyValue::real(c.moe.capacity_factor));
    a.set("moe_pad_expert_input_to_capacity", PyValue::boolean(c.moe.pad_to_capacity));
    a.set("moe_token_drop_policy", PyValue::string(std::string(to_string(c.moe.drop_policy))));
    a.set("moe_router_load_balancing_type", PyValue::string(std::string(to_string(c.moe.load_balancing))));
    a.set("moe_aux_loss_coeff", PyValue::real(c.moe.aux_loss_coeff));
    if (c.moe.apply_probs_on_input) a.set("moe_apply_probs_on_input", PyValue::boolean(true));
  }
  return a.dumps();
}

std::string save_model_checkpoint(const std::string& save_dir, std::int64_t iteration, const GptParameters& params,
                                  const std::string& args_json, const std::string& tokenizer_json) {
  if (params.tensor_parallel().size != 1) throw Error("save_model_checkpoint writes single-shard checkpoints only");
  ckpt::CheckpointMetadata meta;
  meta.iteration = iteration;
  meta.args_json = args_json;
  meta.tokenizer_json = tokenizer_json;
  ckpt::IterationSave save(save_dir, iteration);
  ckpt::ShardWriter writer(save.staged_path(ckpt::shard_file_name(ckpt::ShardId::model_shard(meta.world))), meta);
  for (const ParameterEntry& e : params.entries()) {
    const std::vector<float> values = params.read_param(e);
    writer.write(ckpt::TensorRecord::whole(ckpt::model_tensor_path(e.name), ckpt::TensorDType::Float32, e.global_shape),
                 std::as_bytes(std::span<const float>(values)));
  }
  writer.close();
  save.commit();
  return save.final_dir();
}

ModelCheckpoint open_model_checkpoint(const std::string& load, std::optional<std::int64_t> step) {
  namespace fs = std::filesystem;
  if (load.empty()) throw UsageError("--load is required: the checkpoint to run");
  // Named as the checkpoint directory: the flag is --load in mgt-eval and mgt-generate, --load-dir
  // in mgt-ckpt-convert.
  if (!fs::is_directory(load)) throw Error("checkpoint directory " + load + ": no such directory");
  ModelCheckpoint checkpoint;
  if (step && *step != 0) {
    if (!ckpt::list_shard_files(load).empty())
      throw UsageError("--ckpt-step " + std::to_string(*step) + ": " + load +
                       " is an iteration directory itself; give the --save directory that holds it");
    checkpoint.directory = ckpt::checkpoint_at_step(load, *step).directory;
  } else if (fs::exists(ckpt::tracker_file_path(load))) {
    checkpoint.directory = *ckpt::find_latest_checkpoint_directory(load);
  } else if (!ckpt::list_shard_files(load).empty()) {
    checkpoint.directory = load;
  } else {
    throw Error("checkpoint directory " + load + " holds no checkpoint (no " + std::string(ckpt::kTrackerFileName) +
                " and no " + ckpt::shard_file_name({}) + ")");
  }
  // Any layout: the tensors are assembled from the shard files when read.
  const ckpt::ShardedCheckpoint reader(checkpoint.directory);
  checkpoint.shard_path = ckpt::list_shard_files(checkpoint.directory).front();
  checkpoint.metadata = reader.metadata();
  checkpoint.config = gpt_config_from_args_json(checkpoint.metadata.args_json,
                                                "the arguments of checkpoint " + checkpoint.directory);
  return checkpoint;
}

std::unique_ptr<GptModel> load_checkpoint_model(const ModelCheckpoint& checkpoint, Backend& backend) {
  // No initialisation: every weight is read below. Evaluation and generation need no gradients.
  auto model = std::make_unique<GptModel>(checkpoint.config, backend, std::nullopt, TensorParallelism{},
                                          PipelineParallelism{}, ExpertParallelism{}, ParameterUse::kInference);
  GptParameters& params = model->parameters();
  const ckpt::ShardedCheckpoint reader(checkpoint.directory);
  const std::string where = "checkpoint " + checkpoint.directory;

  std::set<std::string> expected;
  for (const ParameterEntry& e : params.entries()) expected.insert(ckpt::model_tensor_path(e.name));
  for (const std::string& name : reader.tensor_names(ckpt::kModelGroup))
    if (!expected.count(name))
      throw Error(where + ": tensor '" + name + "' is not a parameter of the model its arguments describe");

  std::vector<float> host;
  for (const ParameterEntry& e : params.entries()) {
    const std::string path = ckpt::model_tensor_path(e.name);
    if (!reader.contains(path)) throw Error(where + " has no tensor '" + path + "'");
    host.resize(static_cast<std::size_t>(e.numel()));
    reader.read_whole(path, ckpt::TensorDType::Float32, e.global_shape, std::as_writable_bytes(std::span<float>(host)));
    // A diverged run's weights: every logit would be NaN, every generated token id 0.
    if (!std::all_of(host.begin(), host.end(), [](float v) { return std::isfinite(v); }))
      throw Error(where + ": tensor '" + path + "' holds NaN or infinite values (the run that saved it diverged)");
    params.write_param(e, host);
  }
  // The routing of a model trained with --moe-router-enable-expert-bias depends on its biases.
  ckpt::load_expert_bias(reader, params.moe_expert_bias(), where);
  return model;
}

void check_model_flags_agree(const ModelCheckpoint& checkpoint, const std::map<std::string, std::string>& given) {
  const JsonScalars args(checkpoint.metadata.args_json, "the arguments of checkpoint " + checkpoint.directory);
  const GptConfig& c = checkpoint.config;
  for (const auto& [flag, text] : given) {
    std::string ours;  // the checkpoint's value, as the flag would be typed
    bool numeric = true;
    if (flag == "num-layers") ours = std::to_string(c.num_layers);
    else if (flag == "hidden-size") ours = std::to_string(c.hidden_size);
    else if (flag == "num-attention-heads") ours = std::to_string(c.num_attention_heads);
    else if (flag == "ffn-hidden-size") ours = std::to_string(c.ffn_hidden_size);
    else if (flag == "kv-channels") ours = std::to_string(c.kv_channels);
    else if (flag == "num-query-groups") ours = std::to_string(c.query_groups());
    else if (flag == "max-position-embeddings") ours = std::to_string(c.max_position_embeddings);
    else if (flag == "padded-vocab-size") ours = std::to_string(c.padded_vocab_size);
    else if (flag == "norm-epsilon") ours = std::to_string(c.norm_epsilon);
    else if (flag == "rotary-percent") ours = std::to_string(c.rotary_percent);
    else if (flag == "rotary-base") ours = std::to_string(c.rotary_base);
    else if (flag == "rope-scaling-factor") ours = std::to_string(c.rope_scaling_factor);
    else {
      numeric = false;
      if (flag == "position-embedding-type") ours = std::string(to_string(c.position_embedding_type));
      else if (flag == "normalization") ours = std::string(to_string(c.normalization));
      else if (flag == "swiglu") ours = c.activation == Activation::kSwiglu ? "true" : "false";
      else if (flag == "squared-relu") ours = c.activation == Activation::kSquaredRelu ? "true" : "false";
      else if (flag == "openai-gelu") ours = c.activation == Activation::kOpenaiGelu ? "true" : "false";
      else if (flag == "disable-bias-linear") ours = c.add_bias_linear ? "false" : "true";
      else if (flag == "add-qkv-bias") ours = c.add_qkv_bias ? "true" : "false";
      else if (flag == "untie-embeddings-and-output-weights")
        ours = c.untie_embeddings_and_output_weights ? "true" : "false";
      else if (flag == "group-query-attention") ours = c.group_query_attention ? "true" : "false";
      else if (flag == "use-rope-scaling") ours = c.use_rope_scaling ? "true" : "false";
      else throw UsageError("--" + flag + " is not a model-shape flag");
    }
    bool agree = text == ours;
    if (numeric && !agree) {
      try {
        const double a = std::stod(text), b = std::stod(ours);
        agree = a == b || std::fabs(a - b) <= 1e-12 * std::fabs(b);
      } catch (const std::exception&) {
        agree = false;
      }
    }
    if (!agree) {
      const bool is_switch = ours == "true" || ours == "false";
      throw UsageError("--" + flag + (is_switch ? "" : " " + text) + " disagrees with checkpoint " +
                       checkpoint.directory + " (" + (is_switch ? "saved without it" : ours) +
                       "); the architecture is read from the checkpoint, so model-shape flags may be left out");
    }
  }
}

namespace {
bool records_tokenizer_type(const ModelCheckpoint& checkpoint) {
  return JsonScalars(checkpoint.metadata.tokenizer_json, "the tokenizer of checkpoint " + checkpoint.directory)
      .contains("tokenizer_type");
}
}  // namespace

namespace {

// Flags given beside a recorded tokenizer that it does not take (a --vocab-file for a tokenizer
// that reads none, a --vocab-size for one that is not NullTokenizer of that size): said, since the
// user may believe they chose the tokenizer.
void warn_unused_tokenizer_flags(const TokenizerOptions& flags, const TokenizerOptions& used, const Tokenizer& tokenizer,
                                 const std::string& source) {
  const std::vector<std::string> read = tokenizer.tokenizer_paths();
  const auto unread = [&](const std::string& path) {
    return !path.empty() && std::find(read.begin(), read.end(), path) == read.end();
  };
  std::string unused;
  const auto add = [&](const std::string& text) { unused += (unused.empty() ? "" : ", ") + text; };
  if (unread(flags.vocab_file)) add("--vocab-file " + flags.vocab_file);
  if (unread(flags.merge_file)) add("--merge-file " + flags.merge_file);
  if (unread(flags.tokenizer_model)) add("--tokenizer-model " + flags.tokenizer_model);
  if (flags.vocab_size && (used.type != "NullTokenizer" || used.vocab_size != flags.vocab_size))
    add("--vocab-size " + std::to_string(*flags.vocab_size));
  if (unused.empty()) return;
  log::warn(unused + " ignored: " + source + " is " + tokenizer.class_name() + " (" +
            std::to_string(tokenizer.vocab_size()) + " tokens); pass --tokenizer-type to use another");
}

}  // namespace

std::unique_ptr<Tokenizer> make_checkpoint_tokenizer(const ModelCheckpoint& checkpoint,
                                                     const std::optional<TokenizerOptions>& flags,
                                                     std::string_view program) {
  TokenizerOptions options;
  std::string source;
  // A recorded tokenizer wins over the inference: the files alone then only move its paths.
  std::optional<TokenizerOptions> given = flags;
  if (given && given->type.empty() && !records_tokenizer_type(checkpoint))
    infer_tokenizer_type_from_files(*given, program);
  if (given && !given->type.empty()) {
    options = *given;
    source = "--tokenizer-type " + options.type;
  } else {
    const JsonScalars t(checkpoint.metadata.tokenizer_json, "the tokenizer of checkpoint " + checkpoint.directory);
    if (!t.contains("tokenizer_type"))
      throw UsageError("checkpoint " + checkpoint.directory +
                       " does not record its tokenizer; pass --tokenizer-type (and --vocab-file, --merge-file)");
    options.type = t.text("tokenizer_type");
    if (t.contains("vocab_file") && t.show("vocab_file") != "null") options.vocab_file = t.text("vocab_file");
    if (t.contains("merge_file") && t.show("merge_file") != "null") options.merge_file = t.text("merge_file");
    if (t.contains("vocab_size") && t.show("vocab_size") != "null") options.vocab_size = t.integer("vocab_size");
    if (t.contains("vocab_extra_ids")) options.vocab_extra_ids = static_cast<int>(t.integer("vocab_extra_ids"));
    if (t.contains("tokenizer_model") && t.show("tokenizer_model") != "null") options.tokenizer_model = t.text("tokenizer_model");
    if (t.contains("tiktoken_pattern") && t.show("tiktoken_pattern") != "null") options.tiktoken_pattern = t.text("tiktoken_pattern");
    if (t.contains("tiktoken_num_special_tokens"))
      options.tiktoken_num_special_tokens = static_cast<int>(t.integer("tiktoken_num_special_tokens"));
    if (t.contains("tiktoken_special_tokens")) {
      std::vector<std::string> tokens;
      std::istringstream words(t.text("tiktoken_special_tokens"));
      for (std::string token; words >> token;) tokens.push_back(token);
      options.tiktoken_special_tokens = tokens;
    }
    if (flags) {  // file flags alone override the recorded paths (a checkpoint moved between machines)
      if (!flags->vocab_file.empty()) options.vocab_file = flags->vocab_file;
      if (!flags->merge_file.empty()) options.merge_file = flags->merge_file;
      if (!flags->tokenizer_model.empty()) options.tokenizer_model = flags->tokenizer_model;
      if (flags->tiktoken_special_tokens) options.tiktoken_special_tokens = flags->tiktoken_special_tokens;
    }
    source = "the tokenizer recorded in checkpoint " + checkpoint.directory;
  }
  std::unique_ptr<Tokenizer> tokenizer;
  try {
    tokenizer = make_tokenizer(options);
  } catch (const Error& e) {
    throw Error(source + ": " + e.what() + " (pass --tokenizer-type, --vocab-file, --merge-file to override)",
                e.exit_code());
  }
  if (flags && given->type.empty()) warn_unused_tokenizer_flags(*flags, options, *tokenizer, source);
  if (tokenizer->vocab_size() > checkpoint.config.padded_vocab_size)
    throw UsageError(source + " has " + std::to_string(tokenizer->vocab_size()) +
                     " tokens, more than the model's vocabulary of " +
                     std::to_string(checkpoint.config.padded_vocab_size));
  // A tokenizer of another size than the training run's maps text to other ids: the model would
  // read and write nonsense. (The padding hides it: 30,522 WordPiece tokens fit GPT-2's 50,304.)
  if (checkpoint.metadata.tokenizer_json.empty()) return tokenizer;
  const JsonScalars recorded(checkpoint.metadata.tokenizer_json, "the tokenizer of checkpoint " + checkpoint.directory);
  if (recorded.contains("true_vocab_size") && recorded.integer("true_vocab_size") != tokenizer->vocab_size())
    throw UsageError(source + " has " + std::to_string(tokenizer->vocab_size()) + " tokens, but checkpoint " +
                     checkpoint.directory + " was trained with a tokenizer of " +
                     std::to_string(recorded.integer("true_vocab_size")) +
                     (recorded.contains("tokenizer_type") ? " (" + recorded.text("tokenizer_type") + ")" : "") +
                     "; pass the tokenizer it was trained with");
  return tokenizer;
}

}  // namespace mgt
