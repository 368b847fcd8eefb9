#include "core/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "core/error.hpp"

namespace mgt {

namespace {

// "WHAT 'PATH'", or "'PATH'" without a description.
std::string named(std::string_view what, const std::string& path) {
  return what.empty() ? "'" + path + "'" : std::string(what) + " '" + path + "'";
}

std::string cannot(const char* verb, std::string_view what, const std::string& path) {
  return system_error_message(what.empty() ? std::string(verb) : std::string(verb) + " " + std::string(what), path);
}

[[noreturn]] void refuse(std::string_view what, const std::string& path, mode_t mode, const char* expected) {
  throw Error(named(what, path) + " is " + file_type_name(mode) + ", not " + expected);
}

// What `kind` accepts of a file of type `mode`; throws otherwise.
void check_type(std::string_view what, const std::string& path, mode_t mode, InputKind kind) {
  if (S_ISREG(mode)) return;
  if (kind == InputKind::kRegularFile) refuse(what, path, mode, "a regular file");
  if (S_ISDIR(mode)) refuse(what, path, mode, "a file to read");
}

}  // namespace

std::string file_type_name(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "a special file";
  }
}

InputFile::InputFile(const std::string& path, InputKind kind, std::string_view what) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading waits for a writer otherwise, and a device may wait
  // for its hardware; the type is checked before anything is read. O_NOCTTY: a terminal named
  // as input must not become the controlling terminal.
  do {
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  } while (fd_ < 0 && errno == EINTR);
  if (fd_ < 0) throw Error(cannot("cannot open", what, path));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const std::string message = cannot("cannot stat", what, path);
    close();
    throw Error(message);
  }
  try {
    check_type(what, path, st.st_mode, kind);
  } catch (...) {
    close();
    throw;
  }
  regular_ = S_ISREG(st.st_mode);
  size_ = regular_ ? static_cast<std::uint64_t>(st.st_size) : 0;
  // Reads block as usual from here on; a stream's reader waits for data with poll(2).
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
}

InputFile::~InputFile() { close(); }

InputFile::InputFile(InputFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      regular_(other.regular_),
      size_(other.size_) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    close();
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    regular_ = other.regular_;
    size_ = other.size_;
  }
  return *this;
}

void InputFile::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string read_input_file(const std::string& path, std::string_view what) {
  const InputFile file(path, InputKind::kRegularFile, what);
  std::string text;
  text.resize(static_cast<std::size_t>(file.size()));
  std::size_t got = 0;
  for (;;) {
    if (got == text.size()) text.resize(got + 4096 + got / 2);  // the file grew meanwhile
    const ssize_t n = ::read(file.fd(), text.data() + got, text.size() - got);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(cannot("cannot read", what, path));
    }
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return text;
}

void require_regular_input_file(const std::string& path, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error(cannot("cannot open", what, path));
  check_type(what, path, st.st_mode, InputKind::kRegularFile);
}

}  // namespace mgt
