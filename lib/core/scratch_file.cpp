#include "core/scratch_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "core/file_io.hpp"

namespace mgt {
namespace {
constexpr std::size_t kBufferLimit = 1 << 20;
}

ScratchFile::ScratchFile(const std::string& directory) : directory_(directory) {
  fd_ = ::open(directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    // Not every file system supports O_TMPFILE: fall back to create-then-unlink.
    std::string pattern = directory + "/.mgt-scratch-XXXXXX";
    fd_ = ::mkostemp(pattern.data(), O_CLOEXEC);
    if (fd_ < 0) throw Error(system_error_message("cannot create a scratch file in", directory));
    ::unlink(pattern.c_str());
  }
  buffer_.reserve(kBufferLimit);
}

ScratchFile::~ScratchFile() {
  if (fd_ >= 0) ::close(fd_);
}

void ScratchFile::append(const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  if (buffer_.size() + size > kBufferLimit) flush();
  buffer_.insert(buffer_.end(), p, p + size);
  size_ += size;
}

void ScratchFile::flush() {
  write_all(fd_, buffer_.data(), buffer_.size(), directory_, "cannot write a scratch file in");
  buffer_.clear();
}

void ScratchFile::read(std::size_t offset, void* out, std::size_t size) {
  flush();
  char* p = static_cast<char*>(out);
  while (size > 0) {
    ssize_t n = ::pread(fd_, p, size, static_cast<off_t>(offset));
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      throw Error(system_error_message("cannot read a scratch file in", directory_));
    }
    p += n;
    offset += static_cast<std::size_t>(n);
    size -= static_cast<std::size_t>(n);
  }
}

}  // namespace mgt
