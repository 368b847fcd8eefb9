// Where tensors live inside a shard file. Parameter names are Megatron's
// ("decoder.layers.0.self_attention.linear_qkv.weight"): dots are fine in HDF5 link names and
// '/' never occurs in them, so a parameter name is one path component.
#pragma once
#include <string>
#include <string_view>

namespace mgt::ckpt {

inline constexpr std::string_view kModelGroup = "model";
inline constexpr std::string_view kOptimizerGroup = "optimizer";
inline constexpr std::string_view kRngGroup = "rng";
// Holds the shard's metadata as attributes; never a tensor.
inline constexpr std::string_view kMetaGroup = "meta";

// Per-parameter optimizer state, one subgroup of "optimizer" each.
enum class OptimizerState { MasterParam, ExpAvg, ExpAvgSq };
std::string_view optimizer_state_group(OptimizerState state);  // "fp32_master_params", "exp_avg", ...

std::string model_tensor_path(std::string_view param_name);  // "model/<param>"
std::string optimizer_tensor_path(OptimizerState state, std::string_view param_name);  // "optimizer/exp_avg/<param>"
std::string rng_state_path(std::string_view name);  // "rng/<name>"

// Throws mgt::Error unless the path is '/'-separated non-empty components, none "." or "..",
// and outside the reserved "meta" group.
void validate_tensor_path(std::string_view path);

}  // namespace mgt::ckpt
