#include "ckpt/checkpoint_layout.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ckpt/checkpoint_files.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/message_text.hpp"

namespace mgt::ckpt {
namespace {

std::string zero_padded(std::int64_t value, int width) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%0*lld", width, static_cast<long long>(value));
  return buffer;
}

std::string join_path(const std::string& dir, std::string_view name) {
  std::string path = dir;
  if (!path.empty() && path.back() != '/') path += '/';
  path += name;
  return path;
}

// Consumes a run of decimal digits from the front of `s`.
std::optional<int> take_number(std::string_view& s) {
  std::size_t n = 0;
  while (n < s.size() && s[n] >= '0' && s[n] <= '9') ++n;
  if (n == 0) return std::nullopt;
  int value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + n, value);
  if (ec != std::errc() || end != s.data() + n) return std::nullopt;
  s.remove_prefix(n);
  return value;
}

bool take_prefix(std::string_view& s, std::string_view prefix) {
  if (!s.starts_with(prefix)) return false;
  s.remove_prefix(prefix.size());
  return true;
}

}  // namespace

std::string iteration_directory_name(std::int64_t iteration) {
  if (iteration < 0) throw Error("invalid checkpoint iteration " + std::to_string(iteration));
  return "iter_" + zero_padded(iteration, 7);
}

std::string iteration_directory(const std::string& save_dir, std::int64_t iteration) {
  return join_path(save_dir, iteration_directory_name(iteration));
}

std::string tracker_file_path(const std::string& save_dir) { return join_path(save_dir, kTrackerFileName); }

std::string staging_directory_name(std::int64_t iteration, std::string_view token) {
  return "." + iteration_directory_name(iteration) + ".tmp-" + std::string(token);
}

std::string staging_directory(const std::string& save_dir, std::int64_t iteration, std::string_view token) {
  return join_path(save_dir, staging_directory_name(iteration, token));
}

std::string replaced_directory_name(std::int64_t iteration) {
  return "." + iteration_directory_name(iteration) + ".old";
}

std::optional<std::int64_t> parse_iteration_directory_name(std::string_view name) {
  if (!take_prefix(name, "iter_") || name.empty()) return std::nullopt;
  std::int64_t iteration = 0;
  auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), iteration);
  if (ec != std::errc() || end != name.data() + name.size() || iteration < 0) return std::nullopt;
  // Only the spelling iteration_directory_name gives: "iter_10" and "iter_+000010" are not ours.
  if (name != iteration_directory_name(iteration).substr(5)) return std::nullopt;
  return iteration;
}

std::vector<std::int64_t> list_iteration_directories(const std::string& save_dir) {
  std::vector<std::int64_t> iterations;
  if (!is_directory(save_dir)) return iterations;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(save_dir, ec)) {
    auto iteration = parse_iteration_directory_name(entry.path().filename().string());
    if (iteration && is_directory(entry.path().string())) iterations.push_back(*iteration);
  }
  if (ec) throw Error("cannot list checkpoint directory '" + save_dir + "': " + ec.message());
  std::sort(iterations.begin(), iterations.end());
  return iterations;
}

ShardId ShardId::model_shard(const WorldLayout& world) {
  ShardId id;
  id.tensor_rank = world.tensor_model_parallel_rank;
  if (world.pipeline_model_parallel_size > 1) id.pipeline_rank = world.pipeline_model_parallel_rank;
  return id;
}

ShardId ShardId::data_parallel_shard(const WorldLayout& world) {
  ShardId id = model_shard(world);
  id.data_parallel_rank = world.data_parallel_rank;
  return id;
}

std::string shard_file_name(const ShardId& id) {
  std::string name = "mp_rank_" + zero_padded(id.tensor_rank, 2);
  if (id.pipeline_rank) name += "_" + zero_padded(*id.pipeline_rank, 3);
  if (id.data_parallel_rank) name += "_dp_" + zero_padded(*id.data_parallel_rank, 3);
  return name + std::string(kShardFileExtension);
}

std::optional<ShardId> parse_shard_file_name(std::string_view name) {
  if (!name.ends_with(kShardFileExtension)) return std::nullopt;
  name.remove_suffix(kShardFileExtension.size());
  ShardId id;
  if (!take_prefix(name, "mp_rank_")) return std::nullopt;
  auto tp = take_number(name);
  if (!tp) return std::nullopt;
  id.tensor_rank = *tp;
  if (name.starts_with("_") && !name.starts_with("_dp_")) {
    name.remove_prefix(1);
    id.pipeline_rank = take_number(name);
    if (!id.pipeline_rank) return std::nullopt;
  }
  if (take_prefix(name, "_dp_")) {
    id.data_parallel_rank = take_number(name);
    if (!id.data_parallel_rank) return std::nullopt;
  }
  if (!name.empty()) return std::nullopt;
  return id;
}

std::vector<std::string> list_shard_files(const std::string& iteration_dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(iteration_dir, ec)) {
    auto name = entry.path().filename().string();
    if (parse_shard_file_name(name)) files.push_back(entry.path().string());
  }
  if (ec) throw Error("cannot list checkpoint directory '" + iteration_dir + "': " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

LatestCheckpoint parse_tracker_text(std::string_view text, const std::string& path) {
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  std::string_view t = text;
  while (!t.empty() && is_space(t.front())) t.remove_prefix(1);
  while (!t.empty() && is_space(t.back())) t.remove_suffix(1);
  if (t == kReleaseDirectoryName) return {0, true};
  std::int64_t iteration = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), iteration);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size() || iteration < 0)
    throw Error("checkpoint tracker file '" + path + "' holds " + quoted_for_message(text) +
                ", expected an iteration number or 'release'");
  return {iteration, false};
}

std::optional<LatestCheckpoint> read_tracker_file(const std::string& save_dir) {
  const auto path = tracker_file_path(save_dir);
  if (!path_exists(path)) return std::nullopt;
  // Refuses a FIFO, a device or a directory at the tracker's name instead of blocking on it.
  std::string text = read_input_file(path, "checkpoint tracker file");
  // A real tracker holds a few digits; anything long is garbage.
  if (text.size() > 4096) text.resize(4096);
  return parse_tracker_text(text, path);
}

std::optional<std::int64_t> latest_iteration(const std::string& save_dir) {
  auto latest = read_tracker_file(save_dir);
  if (!latest) return std::nullopt;
  return latest->iteration;
}

void write_tracker_file(const std::string& save_dir, std::int64_t iteration) {
  if (iteration < 0) throw Error("invalid checkpoint iteration " + std::to_string(iteration));
  AtomicFile file(tracker_file_path(save_dir));
  file.write(std::to_string(iteration));  // no newline, like Megatron
  // AtomicFile creates with 0666 minus umask; narrowing that to 0640 keeps the umask's cuts.
  struct stat st;
  if (::stat(file.temp_path().c_str(), &st) == 0)
    ::chmod(file.temp_path().c_str(), st.st_mode & kCheckpointFileMode);
  file.commit();
}

std::string find_checkpoint_directory(const std::string& save_dir, const LatestCheckpoint& which) {
  if (which.release) {
    auto dir = join_path(save_dir, kReleaseDirectoryName);
    if (!is_directory(dir))
      throw Error("checkpoint directory '" + dir + "' named by the tracker file does not exist");
    return dir;
  }
  auto dir = iteration_directory(save_dir, which.iteration);
  if (is_directory(dir)) return dir;
  auto aside = join_path(save_dir, replaced_directory_name(which.iteration));
  if (is_directory(aside)) return aside;
  throw Error("checkpoint directory '" + dir + "' for iteration " + std::to_string(which.iteration) +
              " does not exist");
}

bool is_release_directory(const std::string& directory) {
  std::filesystem::path path(directory);
  if (!path.has_filename()) path = path.parent_path();  // "DIR/release/"
  return path.filename() == kReleaseDirectoryName;
}

std::optional<std::string> find_latest_checkpoint_directory(const std::string& save_dir) {
  auto latest = read_tracker_file(save_dir);
  if (!latest) return std::nullopt;
  return find_checkpoint_directory(save_dir, *latest);
}

}  // namespace mgt::ckpt
