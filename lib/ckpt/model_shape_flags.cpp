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

}  // namespace

void add_model_shape_flags(cxxopts::Options& options) {
  auto group = options.add_options("model (read from the checkpoint; given ones must agree)");
  for (const char* flag : kValueFlags) group(flag, "", cxxopts::value<std::string>(), "V");
  for (const char* flag : kSwitchFlags) group(flag, "");
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
