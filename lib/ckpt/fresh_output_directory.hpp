// The output directory of a conversion: it must be new (absent or empty), it is locked against
// other writers for the whole conversion (SaveDirectoryLock), and a conversion that fails leaves
// nothing behind: what it created there is removed again. What a killed conversion left is no
// obstacle: its lock died with it, and its staging directories (and, beside a Hugging Face
// export, its DIR.partial.* directory) are removed once the lock is held, as mgt-train clears
// what interrupted saves left in --save.
#pragma once
#include <optional>
#include <string>

#include "ckpt/save_directory_lock.hpp"

namespace mgt::ckpt {

class FreshOutputDirectory {
public:
  // Throws mgt::Error when `dir` exists and holds anything besides a lock file and what
  // interrupted writes left (see require_fresh_directory), or when another process holds its
  // lock. Under the lock, removes those leftovers.
  explicit FreshOutputDirectory(std::string dir);
  // Without keep(): removes `dir` when this created it, else everything put into it.
  ~FreshOutputDirectory();
  FreshOutputDirectory(const FreshOutputDirectory&) = delete;
  FreshOutputDirectory& operator=(const FreshOutputDirectory&) = delete;

  const std::string& path() const { return dir_; }
  // The output is complete: keep it. The lock is held until destruction.
  void keep() { keep_ = true; }

  // Puts `complete_dir`, a directory assembled beside path() on the same file system, in its
  // place in one step and keeps it. rename(2) replaces only an empty directory, so the lock file
  // goes first: a writer that takes the lock in between finds the directory full once the
  // rename is done, or makes the rename fail (this conversion then fails, and nothing is mixed).
  void replace_with(const std::string& complete_dir);

private:
  std::string dir_;
  bool created_ = false;
  bool keep_ = false;
  std::optional<SaveDirectoryLock> lock_;
};

// Throws mgt::Error unless `dir` is absent or a directory that holds nothing but a lock file
// and what interrupted writes left (staging directories, tracker temporaries:
// is_interrupted_save_leftover), which the next holder of its lock removes. `flag` names it in
// the message ("--save-dir").
void require_fresh_directory(const std::string& dir, const std::string& flag);

// Removes the directories DIR.partial.XXXXXXXXXXXX (create_temporary_directory's names) that
// exports killed before their rename left beside `dir`, with a warning each. Call it only holding
// dir's lock: only a holder of that lock assembles an export of `dir`.
void remove_interrupted_exports(const std::string& dir);

}  // namespace mgt::ckpt
