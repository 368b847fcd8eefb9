#include "ckpt/save_directory_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "ckpt/checkpoint_files.hpp"
#include "core/error.hpp"
#include "core/log.hpp"

namespace mgt::ckpt {
namespace {

std::string host_name() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof buffer - 1) != 0) return "unknown";
  return buffer;
}

// The value after "KEY=" up to the next blank in the holder record, printable characters only.
std::string field(std::string_view text, std::string_view key) {
  const std::string tag = std::string(key) + "=";
  auto at = text.find(tag);
  if (at == std::string_view::npos) return {};
  std::string value;
  for (char c : text.substr(at + tag.size())) {
    if (c == ' ' || c == '\n' || c == '\t' || value.size() >= 128) break;
    value += (c > 0x20 && c < 0x7f) ? c : '?';
  }
  return value;
}

std::string read_holder(int fd) {
  char buffer[512];
  ssize_t n = ::pread(fd, buffer, sizeof buffer, 0);
  if (n <= 0) return "a process that has not recorded itself yet";
  std::string_view text(buffer, static_cast<std::size_t>(n));
  const std::string host = field(text, "host");
  const std::string pid = field(text, "pid");
  if (host.empty() || pid.empty()) return "a process that has not recorded itself yet";
  return "host " + host + ", pid " + pid;
}

// Best effort: the record only names the holder in other writers' messages, and a full disk
// must not keep a writer from holding the lock (its save then fails with the real cause).
void write_holder(int fd) {
  const std::string record = "host=" + host_name() + " pid=" + std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, record.data(), record.size(), 0) >= 0) return;
}

bool same_file(int fd, const std::string& path) {
  struct stat opened, named;
  return ::fstat(fd, &opened) == 0 && ::stat(path.c_str(), &named) == 0 && opened.st_dev == named.st_dev &&
         opened.st_ino == named.st_ino;
}

bool lock_unsupported(int error) {
  return error == ENOLCK || error == ENOSYS || error == EOPNOTSUPP || error == ENOTSUP || error == EINVAL;
}

}  // namespace

std::string save_lock_file_path(const std::string& save_dir) {
  return (std::filesystem::path(save_dir) / kSaveLockFileName).string();
}

SaveDirectoryLock::SaveDirectoryLock(std::string save_dir) : save_dir_(std::move(save_dir)) {
  if (save_dir_.empty()) throw Error("the checkpoint save directory is an empty path");
  make_checkpoint_directories(save_dir_);
  const std::string path = save_lock_file_path(save_dir_);
  for (;;) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, kCheckpointFileMode);
    if (fd_ < 0) throw Error(system_error_message("cannot open lock file", path));
    int rc;
    do {
      rc = ::flock(fd_, LOCK_EX | LOCK_NB);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      const int error = errno;
      if (error == EWOULDBLOCK) {
        const std::string holder = read_holder(fd_);
        ::close(fd_);
        fd_ = -1;
        throw Error("checkpoint directory " + save_dir_ + " is being written by another process (" + holder +
                    "); one process at a time may write there (lock file " + path + ")");
      }
      if (lock_unsupported(error)) {
        log::warn("cannot lock " + path + " (" + std::string(std::strerror(error)) +
                  "): the file system has no flock; make sure no other process writes to " + save_dir_);
        ::close(fd_);
        fd_ = -1;
        return;
      }
      errno = error;
      const std::string message = system_error_message("cannot lock", path);
      ::close(fd_);
      fd_ = -1;
      throw Error(message);
    }
    // The file may have been replaced between open and flock (someone removed it): then we
    // locked an orphan that no one else will see, and must lock the file now under the name.
    if (same_file(fd_, path)) break;
    ::close(fd_);
    fd_ = -1;
  }
  held_ = true;
  write_holder(fd_);
}

SaveDirectoryLock::~SaveDirectoryLock() { release(); }

SaveDirectoryLock::SaveDirectoryLock(SaveDirectoryLock&& other) noexcept
    : save_dir_(std::move(other.save_dir_)),
      fd_(std::exchange(other.fd_, -1)),
      held_(std::exchange(other.held_, false)) {}

SaveDirectoryLock& SaveDirectoryLock::operator=(SaveDirectoryLock&& other) noexcept {
  if (this != &other) {
    release();
    save_dir_ = std::move(other.save_dir_);
    fd_ = std::exchange(other.fd_, -1);
    held_ = std::exchange(other.held_, false);
  }
  return *this;
}

void SaveDirectoryLock::release() {
  // Closing the only descriptor of this open file description drops the flock.
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  held_ = false;
}

}  // namespace mgt::ckpt
