// Names and places in a checkpoint directory, following Megatron's legacy layout:
//   SAVE/latest_checkpointed_iteration.txt   the iteration number as text, or "release"
//   SAVE/iter_0000100/mp_rank_00.h5           one HDF5 file per model-parallel shard
//   SAVE/iter_0000100/mp_rank_01_002.h5       (tensor rank 1, pipeline rank 2, when PP > 1)
//   SAVE/iter_0000100/mp_rank_00_dp_003.h5    (a per-data-parallel-rank shard, e.g. optimizer)
// plus the hidden names used while a save is in progress.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/checkpoint_metadata.hpp"

namespace mgt::ckpt {

inline constexpr std::string_view kTrackerFileName = "latest_checkpointed_iteration.txt";
inline constexpr std::string_view kReleaseDirectoryName = "release";
inline constexpr std::string_view kShardFileExtension = ".h5";

std::string iteration_directory_name(std::int64_t iteration);  // "iter_0000100"
std::string iteration_directory(const std::string& save_dir, std::int64_t iteration);
std::string tracker_file_path(const std::string& save_dir);
// Whether a checkpoint directory is the release checkpoint ("release" in the tracker file).
bool is_release_directory(const std::string& directory);

// Where a save writes before it is published: ".iter_0000100.tmp-TOKEN" in SAVE. Every rank of
// one save must use the same token (rank 0's PID, a job id, ...).
std::string staging_directory_name(std::int64_t iteration, std::string_view token);
std::string staging_directory(const std::string& save_dir, std::int64_t iteration, std::string_view token);
// Where older mgt versions, which replaced iterations, kept the previous copy while replacing
// it: ".iter_0000100.old". Readers and the clean-up still honour it; nothing writes it now.
std::string replaced_directory_name(std::int64_t iteration);

// Which shard a file holds. pipeline_rank is present when PP > 1 (Megatron's rule for the name);
// data_parallel_rank for shards written per data-parallel rank.
struct ShardId {
  int tensor_rank = 0;
  std::optional<int> pipeline_rank;
  std::optional<int> data_parallel_rank;
  bool operator==(const ShardId&) const = default;

  static ShardId model_shard(const WorldLayout& world);  // this rank's mp_rank file
  static ShardId data_parallel_shard(const WorldLayout& world);  // this rank's mp_rank..._dp file
};

// The iterations of SAVE's iter_NNNNNNN directories (committed checkpoints, complete or not),
// ascending. Hidden staging and aside names are not among them. Empty when SAVE does not exist.
std::vector<std::int64_t> list_iteration_directories(const std::string& save_dir);
// The iteration an "iter_NNNNNNN" name stands for; nullopt for any other name.
std::optional<std::int64_t> parse_iteration_directory_name(std::string_view name);

std::string shard_file_name(const ShardId& id);  // "mp_rank_00.h5", "mp_rank_01_002_dp_003.h5"
std::optional<ShardId> parse_shard_file_name(std::string_view file_name);
// Shard files of an iteration directory, sorted by file name.
std::vector<std::string> list_shard_files(const std::string& iteration_dir);

// Content of the tracker file. A release checkpoint counts as iteration 0, as in Megatron.
struct LatestCheckpoint {
  std::int64_t iteration = 0;
  bool release = false;
  bool operator==(const LatestCheckpoint&) const = default;
};

// nullopt when SAVE has no tracker file (nothing saved yet); mgt::Error when it holds anything
// but an iteration number or "release" (surrounding whitespace allowed).
std::optional<LatestCheckpoint> read_tracker_file(const std::string& save_dir);
std::optional<std::int64_t> latest_iteration(const std::string& save_dir);
LatestCheckpoint parse_tracker_text(std::string_view text, const std::string& path);

// Replaces the tracker file atomically (temporary + fsync + rename + directory fsync).
void write_tracker_file(const std::string& save_dir, std::int64_t iteration);

// The directory that holds a checkpoint. If an older mgt's replacement of that iteration was
// interrupted between moving the old copy aside and moving the new one in, the old copy is returned. Throws
// mgt::Error when neither exists.
std::string find_checkpoint_directory(const std::string& save_dir, const LatestCheckpoint& which);
// The directory the tracker file points at; nullopt when there is no tracker file.
std::optional<std::string> find_latest_checkpoint_directory(const std::string& save_dir);

}  // namespace mgt::ckpt
