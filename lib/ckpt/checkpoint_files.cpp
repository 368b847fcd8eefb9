#include "ckpt/checkpoint_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "core/error.hpp"

namespace mgt::ckpt {

void make_checkpoint_directory(const std::string& path) {
  if (::mkdir(path.c_str(), kCheckpointDirectoryMode) == 0) return;
  if (errno == EEXIST && is_directory(path)) return;
  // "File exists" would say that the directory is there; what is there is something else.
  if (errno == EEXIST)
    throw Error("cannot create checkpoint directory '" + path + "': a file of that name is in the way");
  throw Error(system_error_message("cannot create checkpoint directory", path));
}

void make_checkpoint_directories(const std::string& path) {
  if (path.empty() || is_directory(path)) return;
  std::filesystem::path p(path);
  if (p.has_parent_path() && p.parent_path() != p) make_checkpoint_directories(p.parent_path().string());
  make_checkpoint_directory(path);
}

void create_checkpoint_file(const std::string& path) {
  // Files are created once, in a staging directory of our own: never follow or reuse a name.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, kCheckpointFileMode);
  if (fd < 0) throw Error(system_error_message("cannot create checkpoint file", path));
  ::close(fd);
}

void sync_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(system_error_message("cannot open for fsync", path));
  int rc;
  do {
    rc = ::fsync(fd);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    auto message = system_error_message("cannot fsync", path);
    ::close(fd);
    throw Error(message);
  }
  ::close(fd);
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) throw Error("cannot remove '" + path + "': " + ec.message());
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace mgt::ckpt
