// The output directory of a conversion that writes an mgt checkpoint: it must be new (absent or
// empty), it is locked against other writers for the whole conversion (SaveDirectoryLock), and
// a conversion that fails leaves nothing behind: what it created there is removed again.
#pragma once
#include <optional>
#include <string>

#include "ckpt/save_directory_lock.hpp"

namespace mgt::ckpt {

class FreshOutputDirectory {
public:
  // Throws mgt::Error when `dir` exists and is not an empty directory (a lone lock file counts
  // as empty) or when another process holds its lock.
  explicit FreshOutputDirectory(std::string dir);
  // Without keep(): removes `dir` when this created it, else everything put into it.
  ~FreshOutputDirectory();
  FreshOutputDirectory(const FreshOutputDirectory&) = delete;
  FreshOutputDirectory& operator=(const FreshOutputDirectory&) = delete;

  const std::string& path() const { return dir_; }
  // The output is complete: keep it. The lock is held until destruction.
  void keep() { keep_ = true; }

private:
  std::string dir_;
  bool created_ = false;
  bool keep_ = false;
  std::optional<SaveDirectoryLock> lock_;
};

// Throws mgt::Error unless `dir` is absent or an empty directory (a lone lock file counts as
// empty). `flag` names it in the message ("--save-dir").
void require_fresh_directory(const std::string& dir, const std::string& flag);

}  // namespace mgt::ckpt
