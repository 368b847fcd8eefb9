#include "ckpt/tensor_paths.hpp"

#include "core/error.hpp"

namespace mgt::ckpt {
namespace {

std::string join(std::string_view group, std::string_view name) {
  std::string path(group);
  path += '/';
  path += name;
  return path;
}

}  // namespace

std::string_view optimizer_state_group(OptimizerState state) {
  switch (state) {
    case OptimizerState::MasterParam: return "fp32_master_params";
    case OptimizerState::ExpAvg: return "exp_avg";
    case OptimizerState::ExpAvgSq: return "exp_avg_sq";
  }
  throw Error("unknown optimizer state");
}

std::string model_tensor_path(std::string_view param_name) { return join(kModelGroup, param_name); }

std::string optimizer_tensor_path(OptimizerState state, std::string_view param_name) {
  return join(join(kOptimizerGroup, optimizer_state_group(state)), param_name);
}

std::string rng_state_path(std::string_view name) { return join(kRngGroup, name); }

void validate_tensor_path(std::string_view path) {
  auto bad = [&](const std::string& why) {
    throw Error("invalid checkpoint tensor name '" + std::string(path) + "': " + why);
  };
  if (path.empty()) bad("empty");
  if (path.find('\0') != std::string_view::npos) bad("contains a NUL byte");
  std::size_t start = 0;
  bool first = true;
  while (true) {
    auto slash = path.find('/', start);
    auto part = path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part.empty()) bad("empty path component");
    if (part == "." || part == "..") bad("'.' and '..' are not names");
    if (first && part == kMetaGroup) bad("the '" + std::string(kMetaGroup) + "' group is reserved for metadata");
    first = false;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
}

}  // namespace mgt::ckpt
