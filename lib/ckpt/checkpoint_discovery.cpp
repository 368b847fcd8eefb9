#include "ckpt/checkpoint_discovery.hpp"

#include <filesystem>

#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "core/error.hpp"

namespace mgt::ckpt {

std::string iteration_directory_problem(const std::string& directory, std::int64_t iteration) {
  try {
    const std::vector<std::string> shards = list_shard_files(directory);
    if (shards.empty()) return "it holds no " + shard_file_name({}) + " or other shard file";
    std::int64_t model_shards = 0;
    std::int64_t optimizer_shards = 0;
    std::optional<WorldLayout> world;
    for (const std::string& path : shards) {
      const ShardReader reader(path);
      const CheckpointMetadata& meta = reader.metadata();
      if (meta.iteration != iteration)
        return std::filesystem::path(path).filename().string() + " is of iteration " + std::to_string(meta.iteration);
      if (!world) world = meta.world;
      if (parse_shard_file_name(std::filesystem::path(path).filename().string())->data_parallel_rank) ++optimizer_shards;
      else ++model_shards;
      reader.verify();
    }
    const std::int64_t expected =
        std::int64_t{world->tensor_model_parallel_size} * std::int64_t{world->pipeline_model_parallel_size};
    if (model_shards != expected)
      return "it holds " + std::to_string(model_shards) + " model shards of " + std::to_string(expected);
    // With the distributed optimizer every data-parallel rank of every model shard wrote one.
    const std::int64_t expected_optimizer = expected * std::int64_t{world->data_parallel_size};
    if (optimizer_shards != 0 && optimizer_shards != expected_optimizer)
      return "it holds " + std::to_string(optimizer_shards) + " optimizer shards of " +
             std::to_string(expected_optimizer);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

NewestCompleteIteration find_newest_complete_iteration(const std::string& save_dir) {
  NewestCompleteIteration found;
  const std::vector<std::int64_t> iterations = list_iteration_directories(save_dir);
  for (auto it = iterations.rbegin(); it != iterations.rend(); ++it) {
    IterationCandidate candidate{*it, iteration_directory(save_dir, *it), {}};
    candidate.problem = iteration_directory_problem(candidate.directory, candidate.iteration);
    if (candidate.problem.empty()) {
      found.complete = std::move(candidate);
      break;
    }
    found.skipped.push_back(std::move(candidate));
  }
  return found;
}

}  // namespace mgt::ckpt
