#include "ckpt/checkpoint_reshard.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/iteration_save.hpp"
#include "ckpt/model_checkpoint.hpp"
#include "ckpt/sharded_checkpoint.hpp"
#include "core/error.hpp"
#include "core/json_scalars.hpp"
#include "core/log.hpp"
#include "core/progress.hpp"

namespace mgt::ckpt {
namespace {

constexpr const char* kParallelLayoutKey = "parallel_layout";

bool trained_with_sequence_parallel(const CheckpointMetadata& meta) {
  auto it = meta.extra_json.find(kParallelLayoutKey);
  if (it == meta.extra_json.end()) return false;
  try {
    const mgt::JsonScalars layout(it->second, "parallel layout");
    return layout.contains("sequence_parallel") && layout.show("sequence_parallel") == "true";
  } catch (const Error&) {
    return false;
  }
}

std::string gigabytes_per_second(std::uint64_t bytes, double seconds) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3f GB in %.2f s (%.3f GB/s)", static_cast<double>(bytes) / 1e9, seconds,
                seconds > 0 ? static_cast<double>(bytes) / 1e9 / seconds : 0.0);
  return text;
}

}  // namespace

TargetLayout stored_layout(const ShardedCheckpoint& checkpoint) {
  const WorldLayout& world = checkpoint.metadata().world;
  TargetLayout layout;
  layout.tensor_parallel_size = world.tensor_model_parallel_size;
  layout.pipeline_parallel_size = world.pipeline_model_parallel_size;
  layout.data_parallel_size = world.data_parallel_size;
  for (const std::string& path : list_shard_files(checkpoint.directory()))
    if (parse_shard_file_name(std::filesystem::path(path).filename().string())->data_parallel_rank)
      layout.distributed_optimizer = true;
  return layout;
}

ReshardResult reshard_checkpoint(const std::string& load, const std::string& save_dir, const TargetLayout& layout,
                                 std::uint64_t progress_interval) {
  const auto start = std::chrono::steady_clock::now();
  const ModelCheckpoint opened = open_model_checkpoint(load);
  const ShardedCheckpoint source(opened.directory);
  ReshardResult result;
  result.source = source.directory();
  result.source_layout = stored_layout(source);

  CheckpointMetadata meta = source.metadata();
  meta.extra_json.erase("shard");
  meta.extra_json[kParallelLayoutKey] = parallel_layout_json(layout, trained_with_sequence_parallel(meta));

  const std::vector<std::string> names = source.tensor_names();
  std::uint64_t total_bytes = 0;
  for (const std::string& name : names) total_bytes += source.whole_byte_size(name);

  IterationSave save(save_dir, meta.iteration);
  LayoutShardWriters writers(save.staging_dir(), opened.config, layout, meta);
  Progress progress("tensors", total_bytes, progress_interval ? progress_interval : std::max<std::uint64_t>(1, names.size() / 10));
  std::vector<std::byte> whole;
  for (const std::string& name : names) {
    whole.resize(source.whole_byte_size(name));
    source.read_whole(name, source.dtype(name), source.global_shape(name), whole);
    writers.write(name, source.dtype(name), source.global_shape(name), whole);
    result.bytes_read += whole.size();
    ++result.tensors;
    progress.update(static_cast<std::uint64_t>(result.tensors), result.bytes_read);
  }
  progress.finish(static_cast<std::uint64_t>(result.tensors), result.bytes_read);
  writers.close();
  save.commit();
  result.destination = save.final_dir();
  result.bytes_written = writers.bytes_written();
  result.files_written = writers.file_count();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  log::info("resharded " + result.source + " to " + result.destination + " (" + std::to_string(result.files_written) +
            " files): " + gigabytes_per_second(result.bytes_read, result.seconds));
  return result;
}

}  // namespace mgt::ckpt
