#include "ckpt/fresh_output_directory.hpp"

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <vector>

#include "ckpt/checkpoint_files.hpp"
#include "ckpt/iteration_save.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace mgt::ckpt {
namespace {

namespace fs = std::filesystem;

bool absent(const std::string& dir) {
  std::error_code ec;
  return !fs::exists(fs::symlink_status(dir, ec));
}

// Checked before the lock exists (the directory may not), so nothing is created for a refusal.
std::string checked(std::string dir) {
  require_fresh_directory(dir, "--save-dir");
  return dir;
}

// create_temporary_directory's suffix: ".partial." and 12 characters of [A-Za-z0-9].
bool is_export_staging_name(const std::string& name, const std::string& final_name) {
  const std::string prefix = final_name + ".partial.";
  if (!name.starts_with(prefix) || name.size() != prefix.size() + 12) return false;
  for (char c : name.substr(prefix.size()))
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  return true;
}

}  // namespace

void require_fresh_directory(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  if (absent(dir)) return;
  if (!fs::is_directory(dir, ec)) throw Error(flag + " " + dir + " exists and is not a directory");
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == kSaveLockFileName || is_interrupted_save_leftover(name)) continue;
    throw Error(flag + " " + dir + " is not empty; conversions write a new directory (remove it or choose another)");
  }
  if (ec) throw Error("cannot list " + flag + " " + dir + ": " + ec.message());
}

void remove_interrupted_exports(const std::string& dir) {
  const fs::path final_dir = fs::absolute(fs::path(dir).lexically_normal());
  const fs::path parent = final_dir.parent_path();
  const std::string final_name = final_dir.filename().string();
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(parent, ec))
    if (is_export_staging_name(entry.path().filename().string(), final_name) &&
        entry.is_directory(ec) && !entry.is_symlink(ec))
      stale.push_back(entry.path());
  if (ec) throw Error("cannot list " + parent.string() + ": " + ec.message());
  for (const fs::path& path : stale) {
    log::warn("removing '" + path.string() + "', left by an interrupted export");
    remove_tree(path.string());
  }
  if (!stale.empty()) sync_directory(parent.string());
}

FreshOutputDirectory::FreshOutputDirectory(std::string dir) : dir_(checked(std::move(dir))), created_(absent(dir_)) {
  try {
    lock_.emplace(dir_);
  } catch (...) {
    // The lock creates the directory first. Without a lock file in it no one else is writing
    // there: take it away again (fs::remove leaves a directory that is not empty).
    std::error_code ec;
    if (created_ && !fs::exists(save_lock_file_path(dir_), ec)) fs::remove(dir_, ec);
    throw;
  }
  // Under the lock, what a killed conversion left is no one's: clear it. Then check again:
  // another writer may have been first. (A throw here destroys only the members: nothing of the
  // other writer's is removed.)
  clean_interrupted_saves(dir_);
  require_fresh_directory(dir_, "--save-dir");
}

void FreshOutputDirectory::replace_with(const std::string& complete_dir) {
  const std::string lock_file = save_lock_file_path(dir_);
  if (std::remove(lock_file.c_str()) != 0 && errno != ENOENT)
    throw Error(system_error_message("cannot remove lock file", lock_file));
  if (std::rename(complete_dir.c_str(), dir_.c_str()) != 0)
    throw Error(system_error_message("cannot rename the finished output into place", dir_));
  keep_ = true;
  lock_.reset();
}

FreshOutputDirectory::~FreshOutputDirectory() {
  if (keep_) return;
  std::error_code ec;
  if (created_) {
    fs::remove_all(dir_, ec);
  } else {
    // It was empty when locked, so everything in it now is this conversion's.
    for (const auto& entry : fs::directory_iterator(dir_, ec)) {
      std::error_code remove_ec;
      fs::remove_all(entry.path(), remove_ec);
    }
  }
  if (ec) log::warn("cannot remove the partial output " + dir_ + ": " + ec.message());
}

}  // namespace mgt::ckpt
