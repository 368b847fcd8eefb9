#include "core/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/temporary_file.hpp"

namespace mgt {
namespace {
constexpr std::size_t kBufferSize = 1 << 20;
}

std::string parent_directory(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void sync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: some file systems refuse to open directories
  ::fsync(fd);
  ::close(fd);
}

AtomicFile::AtomicFile(std::string final_path) : final_path_(std::move(final_path)) {
  TemporaryFile temp = create_temporary_file(final_path_);
  fd_ = temp.fd;
  temp_path_ = std::move(temp.path);
  buffer_.reserve(kBufferSize);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

void AtomicFile::write(const void* data, std::size_t size) {
  written_ += size;
  if (buffer_.size() + size <= kBufferSize) {
    buffer_.append(static_cast<const char*>(data), size);
    return;
  }
  flush_buffer();
  if (size >= kBufferSize) {
    write_all(fd_, data, size, temp_path_);
  } else {
    buffer_.append(static_cast<const char*>(data), size);
  }
}

void AtomicFile::flush_buffer() {
  write_all(fd_, buffer_.data(), buffer_.size(), temp_path_);
  buffer_.clear();
}

void AtomicFile::commit() {
  if (committed_) return;
  flush_buffer();
  if (::fsync(fd_) != 0) throw Error(system_error_message("cannot fsync", temp_path_));
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw Error(system_error_message("cannot close", temp_path_));
  }
  fd_ = -1;
  if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0)
    throw Error(system_error_message("cannot rename into place", final_path_));
  committed_ = true;
  sync_directory(parent_directory(final_path_));
}

void check_atomic_destination(const std::string& path, const std::string& what) {
  const std::string dir = parent_directory(path);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw Error(what + " " + path + ": directory '" + dir + "' does not exist");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(what + " " + path + ": directory '" + dir + "' is not writable");
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw Error(what + " " + path + " is a directory: name a file");
}

void write_file_atomically(const std::string& path, std::string_view contents) {
  AtomicFile f(path);
  f.write(contents);
  f.commit();
}

}  // namespace mgt
