#include "model/parameter_sharding.hpp"

#include <string>

#include "core/error.hpp"

namespace mgt {
namespace {

void check_sizes(const ParameterEntry& entry, size_t shard, size_t whole, const char* what) {
  if (static_cast<int64_t>(shard) != entry.numel() ||
      static_cast<int64_t>(whole) != entry.global_numel()) {
    throw Error(std::string(what) + ": " + entry.name + " has " + std::to_string(entry.numel()) +
                " elements per shard and " + std::to_string(entry.global_numel()) +
                " in all, got " + std::to_string(shard) + " and " + std::to_string(whole));
  }
}

}  // namespace

std::vector<float> shard_tensor(const ParameterEntry& entry, const TensorParallelRank& tp,
                                std::span<const float> whole) {
  std::vector<float> shard(static_cast<size_t>(entry.numel()));
  check_sizes(entry, shard.size(), whole.size(), "shard_tensor");
  for (int64_t i = 0; i < entry.numel(); ++i) {
    shard[static_cast<size_t>(i)] = whole[static_cast<size_t>(entry.global_index(i, tp))];
  }
  return shard;
}

void unshard_tensor(const ParameterEntry& entry, const TensorParallelRank& tp,
                    std::span<const float> shard, std::span<float> whole) {
  check_sizes(entry, shard.size(), whole.size(), "unshard_tensor");
  for (int64_t i = 0; i < entry.numel(); ++i) {
    whole[static_cast<size_t>(entry.global_index(i, tp))] = shard[static_cast<size_t>(i)];
  }
}

void shard_parameters(const GptParameters& whole, GptParameters& shard) {
  if (whole.tensor_parallel().size != 1) {
    throw Error("shard_parameters: the source parameters are themselves a tensor-parallel shard");
  }
  if (whole.entries().size() != shard.entries().size()) {
    throw Error("shard_parameters: the two models have different parameter tables");
  }
  for (const ParameterEntry& e : shard.entries()) {
    const ParameterEntry& source = whole.entry(e.name);
    if (source.global_shape != e.global_shape) {
      throw Error("shard_parameters: " + e.name + " has different shapes in the two models");
    }
    shard.write_param(e, shard_tensor(e, shard.tensor_parallel(), whole.read_param(source)));
  }
}

}  // namespace mgt
