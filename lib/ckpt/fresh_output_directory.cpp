#include "ckpt/fresh_output_directory.hpp"

#include <filesystem>
#include <system_error>

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

}  // namespace

void require_fresh_directory(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  if (absent(dir)) return;
  if (!fs::is_directory(dir, ec)) throw Error(flag + " " + dir + " exists and is not a directory");
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename() == kSaveLockFileName) continue;
    throw Error(flag + " " + dir + " is not empty; conversions write a new directory (remove it or choose another)");
  }
  if (ec) throw Error("cannot list " + flag + " " + dir + ": " + ec.message());
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
  // Again under the lock: another writer may have been first. (A throw here destroys only the
  // members: nothing of the other writer's is removed.)
  require_fresh_directory(dir_, "--save-dir");
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
