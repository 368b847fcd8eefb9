#include "ckpt/iteration_save.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "ckpt/checkpoint_files.hpp"
#include "ckpt/checkpoint_layout.hpp"
#include "core/temporary_file.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace mgt::ckpt {
namespace {

std::string in_dir(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

[[noreturn]] void throw_committed(const std::string& final_dir) {
  throw Error("checkpoint directory " + final_dir +
              " already exists; a committed checkpoint is never replaced (move it away to save this iteration again)");
}

void report(const SaveOptions& options, SaveStep step) {
  if (options.on_step) options.on_step(step);
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw Error(system_error_message("cannot rename '" + from + "' to", to));
}

// Renames `from` to `to` unless `to` exists. rename(2) alone would replace an empty directory
// at `to`; renameat2(RENAME_NOREPLACE) refuses any existing entry in the same step. Where the
// file system cannot (EINVAL), the check before the rename stands in: the writer's lock keeps
// other mgt writers out of the directory meanwhile.
void rename_without_replacing(const std::string& from, const std::string& to) {
#ifdef RENAME_NOREPLACE
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return;
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP && errno != EOPNOTSUPP) {
    if (errno == EEXIST || errno == ENOTEMPTY) throw_committed(to);
    throw Error(system_error_message("cannot rename '" + from + "' to", to));
  }
#endif
  if (path_exists(to)) throw_committed(to);
  rename_or_throw(from, to);
}

std::string default_token(const SaveOptions& options) {
  if (!options.staging_token.empty()) {
    if (options.staging_token.find('/') != std::string::npos)
      throw Error("checkpoint staging token '" + options.staging_token + "' must not contain '/'");
    return options.staging_token;
  }
  // Unpredictable, so nothing can be planted at the staging name beforehand.
  return random_name_suffix();
}

void sync_tree_files(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file()) sync_file(entry.path().string());
    else if (entry.is_directory()) sync_tree_files(entry.path().string());
  }
  if (ec) throw Error("cannot list checkpoint staging directory '" + dir + "': " + ec.message());
  sync_directory(dir);
}

}  // namespace

std::string_view save_step_name(SaveStep step) {
  switch (step) {
    case SaveStep::StagingSynced: return "staging synced";
    case SaveStep::Published: return "published";
    case SaveStep::TrackerWritten: return "tracker written";
  }
  return "unknown";
}

namespace {

bool is_staging_name(std::string_view name) {
  return name.starts_with(".iter_") && name.find(".tmp-") != std::string_view::npos;
}

bool is_tracker_temporary_name(std::string_view name) {
  return name.starts_with(kTrackerFileName) && name.substr(kTrackerFileName.size()).starts_with(".tmp.");
}

}  // namespace

bool is_interrupted_save_leftover(std::string_view name) {
  return is_staging_name(name) || is_tracker_temporary_name(name);
}

void clean_interrupted_saves(const std::string& save_dir, const std::string& keep) {
  if (!is_directory(save_dir)) return;
  bool changed = false;
  std::vector<std::filesystem::path> entries;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(save_dir, ec)) entries.push_back(entry.path());
  if (ec) throw Error("cannot list checkpoint directory '" + save_dir + "': " + ec.message());

  for (const auto& path : entries) {
    const std::string name = path.filename().string();
    const std::string full = path.string();
    if (is_staging_name(name)) {
      if (!keep.empty() && std::filesystem::path(keep).filename() == name) continue;
      log::warn("removing '" + full + "', left by an interrupted checkpoint save");
      remove_tree(full);
      changed = true;
    } else if (is_tracker_temporary_name(name)) {
      remove_tree(full);
      changed = true;
    } else if (name.starts_with(".iter_") && name.ends_with(".old")) {
      // ".iter_0000100.old" -> "iter_0000100"
      const std::string final_path = in_dir(save_dir, name.substr(1, name.size() - 1 - 4));
      if (is_directory(final_path)) {
        remove_tree(full);
      } else {
        log::warn("restoring '" + final_path + "' from '" + full + "' after an interrupted checkpoint save");
        rename_or_throw(full, final_path);
      }
      changed = true;
    }
  }
  if (changed) sync_directory(save_dir);
}

std::string prepare_staging_directory(const std::string& save_dir, std::int64_t iteration,
                                      const SaveOptions& options) {
  make_checkpoint_directories(save_dir);
  clean_interrupted_saves(save_dir);  // first: it may bring back an iteration an older mgt set aside
  const auto final_dir = iteration_directory(save_dir, iteration);
  if (path_exists(final_dir)) throw_committed(final_dir);
  const auto staging = staging_directory(save_dir, iteration, default_token(options));
  make_checkpoint_directory(staging);
  return staging;
}

void publish_iteration(const std::string& save_dir, std::int64_t iteration, const std::string& staging_dir,
                       const SaveOptions& options) {
  if (!is_directory(staging_dir))
    throw Error("checkpoint staging directory '" + staging_dir + "' does not exist");
  sync_tree_files(staging_dir);
  report(options, SaveStep::StagingSynced);

  const auto final_dir = iteration_directory(save_dir, iteration);
  rename_without_replacing(staging_dir, final_dir);
  try {
    sync_directory(save_dir);
    report(options, SaveStep::Published);
    write_tracker_file(save_dir, iteration);
  } catch (...) {
    // All or nothing: an iteration the tracker does not reach goes back to its staging name
    // (for the caller to remove), or a resumed run would find it in the way of its own save.
    if (::rename(final_dir.c_str(), staging_dir.c_str()) == 0) {
      try {
        sync_directory(save_dir);
      } catch (const Error&) {
      }
    }
    throw;
  }
  report(options, SaveStep::TrackerWritten);
}

IterationSave::IterationSave(std::string save_dir, std::int64_t iteration, SaveOptions options)
    : save_dir_(std::move(save_dir)), iteration_(iteration), options_(std::move(options)) {
  staging_dir_ = prepare_staging_directory(save_dir_, iteration_, options_);
}

IterationSave::~IterationSave() {
  if (committed_) return;
  std::error_code ec;
  std::filesystem::remove_all(staging_dir_, ec);  // best effort; the next save cleans up anyway
}

std::string IterationSave::staged_path(std::string_view file_name) const {
  return in_dir(staging_dir_, std::string(file_name));
}

std::string IterationSave::final_dir() const { return iteration_directory(save_dir_, iteration_); }

void IterationSave::commit() {
  if (committed_) throw Error("checkpoint for iteration " + std::to_string(iteration_) + " already committed");
  publish_iteration(save_dir_, iteration_, staging_dir_, options_);
  committed_ = true;
}

}  // namespace mgt::ckpt
