#include "ckpt/model_shape_flags.hpp"

#include <array>
#include <set>
#include <string_view>

#include "core/command_line.hpp"

namespace mgt {

namespace {

constexpr std::array kValueFlags = {"num-layers",       "hidden-size",      "num-attention-heads",
                                    "ffn-hidden-size",  "kv-channels",      "num-query-groups",
                                    "max-position-embeddings", "position-embedding-type", "normalization",
                                    "norm-epsilon",     "rotary-percent",   "rotary-base",
                                    "rope-scaling-factor"};
const std::set<std::string_view> kRealFlags = {"norm-epsilon", "rotary-percent", "rope-scaling-factor"};
const std::set<std::string_view> kTextFlags = {"position-embedding-type", "normalization"};
constexpr std::array kSwitchFlags = {"swiglu", "openai-gelu", "disable-bias-linear",
                                     "untie-embeddings-and-output-weights", "group-query-attention",
                                     "use-rope-scaling"};

// What each flag sets, for --help; the checkpoint's value is the one used.
const std::map<std::string_view, const char*> kDescriptions = {
    {"num-layers", "Transformer layers"},
    {"hidden-size", "Hidden size"},
    {"num-attention-heads", "Attention heads"},
    {"ffn-hidden-size", "MLP hidden size"},
    {"kv-channels", "Channels per head"},
    {"num-query-groups", "Key/value groups of grouped-query attention"},
    {"max-position-embeddings", "Positions of the model"},
    {"position-embedding-type", "learned_absolute, rope or none"},
    {"normalization", "LayerNorm or RMSNorm"},
    {"norm-epsilon", "Norm epsilon"},
    {"rotary-percent", "Fraction of each head rotated by RoPE"},
    {"rotary-base", "RoPE base"},
    {"rope-scaling-factor", "Factor of Llama 3.1's RoPE scaling"},
    {"swiglu", "SwiGLU MLP"},
    {"openai-gelu", "GELU by its tanh approximation"},
    {"disable-bias-linear", "No biases in the linear layers"},
    {"untie-embeddings-and-output-weights", "Separate output layer weights"},
    {"group-query-attention", "Grouped-query attention"},
    {"use-rope-scaling", "Llama 3.1's scaling of the RoPE frequencies"},
};

std::string described(const char* flag) {
  return std::string(kDescriptions.at(flag)) + ", as the checkpoint has it";
}

}  // namespace

void add_model_shape_flags(cxxopts::Options& options) {
  auto group = options.add_options("model (read from the checkpoint; given ones must agree)");
  for (const char* flag : kValueFlags) group(flag, described(flag), cxxopts::value<std::string>(), "V");
  for (const char* flag : kSwitchFlags) group(flag, described(flag));
}

std::map<std::string, std::string> given_model_shape_flags(const cxxopts::ParseResult& result) {
  std::map<std::string, std::string> given;
  for (const char* flag : kValueFlags) {
    if (!result.count(flag)) continue;
    const std::string text = result[flag].as<std::string>();
    // Numbers are checked as mgt-train checks them (finite, in the flag's range) before they are
    // compared with the checkpoint, so that a bad value is named as such.
    const std::string name = std::string("--") + flag;
    if (kRealFlags.count(flag)) parse_real_flag(name, text);
    else if (!kTextFlags.count(flag)) parse_integer_flag(name, text);
    given[flag] = text;
  }
  for (const char* flag : kSwitchFlags)
    if (result.count(flag)) given[flag] = "true";
  return given;
}

}  // namespace mgt
