#include "ckpt/model_shape_flags.hpp"

#include <array>

namespace mgt {

namespace {

constexpr std::array kValueFlags = {"num-layers",       "hidden-size",      "num-attention-heads",
                                    "ffn-hidden-size",  "kv-channels",      "num-query-groups",
                                    "max-position-embeddings", "position-embedding-type", "normalization",
                                    "norm-epsilon",     "rotary-percent",   "rotary-base"};
constexpr std::array kSwitchFlags = {"swiglu", "openai-gelu", "disable-bias-linear",
                                     "untie-embeddings-and-output-weights", "group-query-attention"};

}  // namespace

void add_model_shape_flags(cxxopts::Options& options) {
  auto group = options.add_options("model (read from the checkpoint; given ones must agree)");
  for (const char* flag : kValueFlags) group(flag, "", cxxopts::value<std::string>(), "V");
  for (const char* flag : kSwitchFlags) group(flag, "");
}

std::map<std::string, std::string> given_model_shape_flags(const cxxopts::ParseResult& result) {
  std::map<std::string, std::string> given;
  for (const char* flag : kValueFlags)
    if (result.count(flag)) given[flag] = result[flag].as<std::string>();
  for (const char* flag : kSwitchFlags)
    if (result.count(flag)) given[flag] = "true";
  return given;
}

}  // namespace mgt
