#include "ckpt/model_shape_flags.hpp"

#include <array>
#include <string_view>

#include "model/model_flags.hpp"

namespace mgt {

namespace {

// The flags check_model_flags_agree compares with a checkpoint, in --help order. The others of
// model_flags() describe training (dropout, initialisation, recomputation) or mean something else
// when a checkpoint is read (--seq-length).
constexpr std::array kCheckedFlags = {
    "num-layers",       "hidden-size",          "num-attention-heads", "ffn-hidden-size",
    "kv-channels",      "num-query-groups",     "max-position-embeddings", "position-embedding-type",
    "normalization",    "norm-epsilon",         "rotary-percent",      "rotary-base",
    "rope-scaling-factor", "swiglu",            "squared-relu",        "openai-gelu",  "disable-bias-linear",
    "add-qkv-bias",     "qk-layernorm",
    "untie-embeddings-and-output-weights", "group-query-attention", "use-rope-scaling"};

// The shared definition, described as the checkpoint's value, recording what was given.
FlagDefinition checked_against_checkpoint(const FlagDefinition& shared, std::map<std::string, std::string>& given) {
  const std::string name = shared.name();
  return custom_flag(
             name, shared.arity(), shared.metavar(), shared.description() + ", as the checkpoint has it",
             [shared, &given, name](const std::vector<std::string>& values) {
               shared.set(values);  // parsed and range-checked as mgt-train does, naming the flag
               given[name] = values.empty() ? "true" : values.front();
             },
             // Only a value given is checked (choices); absent, the checkpoint's holds.
             [shared, &given, name]() { return given.count(name) ? shared.value() : ArgValue(); })
      .choices(shared.supported_choices(), shared.megatron_only_choices());
}

}  // namespace

std::vector<FlagDefinition> checkpoint_model_flags(ModelShapeOptions& parsed, std::map<std::string, std::string>& given) {
  const std::vector<FlagDefinition> shared = model_flags(parsed);
  std::vector<FlagDefinition> flags;
  for (std::string_view name : kCheckedFlags) {
    flags.push_back(checked_against_checkpoint(find_flag(shared, name), given));
  }
  return flags;
}

}  // namespace mgt
