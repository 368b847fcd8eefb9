// One writer per save directory. A process that writes checkpoints into SAVE holds an exclusive
// flock(2) on SAVE/.mgt-writer.lock for as long as it may write; the kernel drops the lock when
// the process ends, however it ends, so a killed run never leaves a stale lock behind. The file
// names the holder (host and PID) for the message a second writer gets. The file itself stays:
// removing it would let two processes lock two different files under the same name.
//
// What only the writer may do (clearing what interrupted saves left, preparing and publishing
// staging directories) happens after the lock is taken. With several ranks, one rank (the one
// that prepares and publishes the staging directory) holds the lock for the whole job; the other
// ranks write only into the staging directory it prepared, so they need no lock of their own.
#pragma once
#include <string>
#include <string_view>

namespace mgt::ckpt {

inline constexpr std::string_view kSaveLockFileName = ".mgt-writer.lock";

std::string save_lock_file_path(const std::string& save_dir);

class SaveDirectoryLock {
public:
  // Creates SAVE (and its parents) when missing, then takes the lock without waiting. Throws
  // mgt::Error naming SAVE and the holder's host and PID when another process holds it. On a file
  // system without flock (some Lustre and NFS mounts) it warns and goes on unlocked.
  explicit SaveDirectoryLock(std::string save_dir);
  ~SaveDirectoryLock();  // releases the lock
  SaveDirectoryLock(SaveDirectoryLock&& other) noexcept;
  SaveDirectoryLock& operator=(SaveDirectoryLock&& other) noexcept;
  SaveDirectoryLock(const SaveDirectoryLock&) = delete;
  SaveDirectoryLock& operator=(const SaveDirectoryLock&) = delete;

  const std::string& directory() const { return save_dir_; }
  // False when the file system could not lock (the warning was given) or after a move.
  bool held() const { return held_; }

  // Releases now; the lock file stays.
  void release();

private:
  std::string save_dir_;
  int fd_ = -1;
  bool held_ = false;
};

}  // namespace mgt::ckpt
