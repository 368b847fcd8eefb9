#include "ckpt/checkpoint_args_flags.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>

#include "ckpt/checkpoint_discovery.hpp"
#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "core/command_line.hpp"
#include "core/error.hpp"
#include "core/json_text.hpp"

namespace mgt {

namespace {

// Megatron's _set_arg calls, in its order; `force`: the checkpoint's value replaces one the
// command line gives. Arguments mgt has no flag for (Mamba's, the hybrid and heterogeneous
// models', the spec) find no flag below and are passed over.
struct TakenArg {
  const char* name;
  bool force;
};
constexpr TakenArg kTakenArgs[] = {
    {"num_layers", false},
    {"hidden_size", false},
    {"ffn_hidden_size", false},
    {"seq_length", false},
    {"num_attention_heads", false},
    {"num_query_groups", true},
    {"group_query_attention", true},
    {"kv_channels", false},
    {"max_position_embeddings", false},
    {"position_embedding_type", true},
    {"add_position_embedding", true},
    {"use_rotary_position_embeddings", true},
    {"rotary_base", true},
    {"rotary_percent", true},
    {"rotary_interleaved", true},
    {"add_bias_linear", true},
    {"add_qkv_bias", true},
    {"squared_relu", true},
    {"swiglu", true},
    {"untie_embeddings_and_output_weights", true},
    {"apply_layernorm_1p", true},
    {"normalization", true},
    {"apply_query_key_layer_scaling", true},
    {"attention_dropout", true},
    {"hidden_dropout", true},
    {"num_experts", true},
    {"moe_layer_freq", true},
    {"moe_ffn_hidden_size", true},
    {"moe_router_topk", true},
    {"moe_token_dispatcher_type", true},
    {"moe_router_pre_softmax", true},
    {"moe_grouped_gemm", true},
    {"moe_shared_expert_intermediate_size", true},
    {"tokenizer_type", true},
    {"tokenizer_model", true},
    {"tiktoken_pattern", true},
    {"padded_vocab_size", false},
};

// And with --use-mp-args-from-checkpoint-args, the parallel layout (Megatron's "Model parallelism
// args", checkpoint version 3).
constexpr TakenArg kParallelArgs[] = {
    {"tensor_model_parallel_size", true},
    {"pipeline_model_parallel_size", true},
    {"virtual_pipeline_model_parallel_size", true},
    {"num_layers_per_virtual_pipeline_stage", false},
    {"expert_model_parallel_size", true},
};

// The recorded arguments as flag values: nullopt for None; booleans "true"/"false"; lists as JSON.
using RecordedArgs = std::map<std::string, std::optional<std::string>>;

RecordedArgs recorded_args(const std::string& json, const std::string& what) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto error = parser.parse(json).get(root); error)
    throw Error(what + " is not valid JSON (" + simdjson::error_message(error) + ")");
  simdjson::dom::object object;
  if (root.get(object)) throw Error(what + " is not a JSON object");
  RecordedArgs args;
  for (auto field : object) {
    const simdjson::dom::element v = field.value;
    std::optional<std::string> text;
    switch (v.type()) {
      case simdjson::dom::element_type::NULL_VALUE: break;
      case simdjson::dom::element_type::BOOL: text = v.get_bool().value() ? "true" : "false"; break;
      case simdjson::dom::element_type::INT64: text = std::to_string(v.get_int64().value()); break;
      case simdjson::dom::element_type::UINT64: text = std::to_string(v.get_uint64().value()); break;
      case simdjson::dom::element_type::DOUBLE: text = python_float_repr(v.get_double().value()); break;
      case simdjson::dom::element_type::STRING: text = std::string(v.get_string().value()); break;
      default: text = simdjson::minify(v); break;
    }
    args[std::string(field.key)] = text;
  }
  // Older checkpoints' one-off name (Megatron converts it the same way).
  if (const auto old = args.find("disable_bias_linear"); old != args.end() && old->second)
    args["add_bias_linear"] = *old->second == "true" ? "false" : "true";
  return args;
}

bool names_flag(const std::string& token, const std::string& flag) {
  return token == flag || token.rfind(flag + "=", 0) == 0;
}

// The last value given to `flag`, if any.
std::optional<std::string> last_value(const std::vector<std::string>& args, const std::string& flag) {
  std::optional<std::string> value;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) value = args[i + 1];
    else if (args[i].rfind(flag + "=", 0) == 0) value = args[i].substr(flag.size() + 1);
  }
  return value;
}

bool is_value(const std::string& token) {
  return token.size() < 2 || token[0] != '-' || std::isdigit(static_cast<unsigned char>(token[1])) || token[1] == '.';
}

// `args` without the occurrences of `flag` and the values they take.
std::vector<std::string> without(const std::vector<std::string>& args, const FlagDefinition& flag) {
  std::vector<std::string> kept;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] != flag.flag()) {
      if (!names_flag(args[i], flag.flag())) kept.push_back(args[i]);
      continue;
    }
    if (flag.arity() == FlagArity::One && i + 1 < args.size()) ++i;
    else if (flag.arity() == FlagArity::Many || flag.arity() == FlagArity::ManyAppending)
      while (i + 1 < args.size() && is_value(args[i + 1])) ++i;
  }
  return kept;
}

// An integral number recorded as a float (mgt-ckpt-convert's import records a Hugging Face
// rope_theta of 10000.0 so) in the integer an integer flag takes; other text as it is.
std::string as_integer_where_integral(const std::string& value) {
  char* end = nullptr;
  const double number = std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(number) ||
      number != std::floor(number) || std::fabs(number) > 9.0e15)
    return value;
  return std::to_string(static_cast<std::int64_t>(number));
}

// The tokens that give `flag` the recorded `value`.
std::vector<std::string> tokens_for(const FlagDefinition& flag, const std::string& name, std::string value) {
  if (flag.arity() == FlagArity::None) {
    const ArgValue fallback = flag.value();
    const bool* when_absent = std::get_if<bool>(&fallback);
    if (when_absent == nullptr || (value != "true" && value != "false"))
      throw Error("--use-checkpoint-args: the checkpoint records " + name + " as " + value +
                  ", which " + flag.flag() + " cannot take");
    return (value == "true") != *when_absent ? std::vector<std::string>{flag.flag()} : std::vector<std::string>{};
  }
  if (std::holds_alternative<std::int64_t>(flag.value())) value = as_integer_where_integral(value);
  if (flag.arity() == FlagArity::One || value.empty() || value.front() != '[') return {flag.flag() + "=" + value};
  // A list: its elements as separate values.
  std::vector<std::string> tokens = {flag.flag()};
  std::string element;
  for (char c : value.substr(1, value.size() - 2)) {
    if (c == ',') {
      tokens.push_back(element);
      element.clear();
    } else if (c != '"') {
      element += c;
    }
  }
  if (!element.empty()) tokens.push_back(element);
  return tokens;
}

// How Python prints the value in Megatron's "Setting ... from checkpoint".
std::string python_text(const std::string& value) {
  if (value == "true") return "True";
  if (value == "false") return "False";
  return value;
}

}  // namespace

CheckpointArgsCommandLine command_line_with_checkpoint_args(const std::vector<std::string>& args,
                                                            std::span<const FlagDefinition> flags) {
  CheckpointArgsCommandLine out{args, {}};
  if (std::find(args.begin(), args.end(), "--use-checkpoint-args") == args.end()) return out;
  const std::optional<std::string> load = last_value(args, "--load");
  if (!load) throw UsageError("--use-checkpoint-args requires --load argument");
  std::optional<std::int64_t> step;
  if (const std::optional<std::string> text = last_value(args, "--ckpt-step"))
    step = parse_integer_flag("--ckpt-step", *text);
  const std::optional<ckpt::CheckpointToResume> found = ckpt::find_checkpoint_to_load(*load, step);
  if (!found) {
    out.lines.push_back("Checkpoint not found to provide arguments, using provided arguments.");
    return out;
  }
  const std::vector<std::string> shards = ckpt::list_shard_files(found->directory);
  const std::string json = shards.empty() ? "" : ckpt::ShardReader(shards.front()).metadata().args_json;
  if (json.empty()) {
    out.lines.push_back("Checkpoint provided does not have arguments saved, using provided arguments.");
    return out;
  }
  const RecordedArgs recorded = recorded_args(json, "the arguments of checkpoint " + found->directory);
  const auto recorded_value = [&](const std::string& name) -> std::optional<std::string> {
    const auto it = recorded.find(name);
    return it == recorded.end() ? std::nullopt : it->second;
  };
  const bool experts = recorded_value("num_experts").has_value();
  const bool tokenizer_model = std::find(args.begin(), args.end(), "--no-use-tokenizer-model-from-checkpoint-args") ==
                               args.end();
  std::vector<TakenArg> taking(std::begin(kTakenArgs), std::end(kTakenArgs));
  if (std::find(args.begin(), args.end(), "--use-mp-args-from-checkpoint-args") != args.end())
    taking.insert(taking.end(), std::begin(kParallelArgs), std::end(kParallelArgs));
  for (const TakenArg& taken : taking) {
    const std::string name = taken.name;
    if (name == "tokenizer_model" && !tokenizer_model) continue;
    std::vector<const FlagDefinition*> recording;
    for (const FlagDefinition& f : flags)
      if (f.record_key() == name) recording.push_back(&f);
    if (recording.empty()) continue;
    // Megatron sets moe_ffn_hidden_size to None for a checkpoint without experts.
    if (name == "moe_ffn_hidden_size" && !experts) {
      for (const FlagDefinition* f : recording) out.args = without(out.args, *f);
      continue;
    }
    const bool given = std::any_of(out.args.begin(), out.args.end(), [&](const std::string& token) {
      return std::any_of(recording.begin(), recording.end(),
                         [&](const FlagDefinition* f) { return names_flag(token, f->flag()); });
    });
    if (!taken.force && given) continue;
    const std::optional<std::string> value = recorded_value(name);
    if (!value) {
      out.lines.push_back("Checkpoint did not provide arguments " + name);
      continue;
    }
    out.lines.push_back("Setting " + name + " to " + python_text(*value) + " from checkpoint");
    for (const FlagDefinition* f : recording) out.args = without(out.args, *f);
    for (const std::string& token : tokens_for(*recording.front(), name, *value)) out.args.push_back(token);
  }
  return out;
}

}  // namespace mgt
