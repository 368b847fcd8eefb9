#include "core/temporary_file.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <random>

#include "core/error.hpp"

namespace mgt {

namespace {

// Names tried before giving up; each collision means something already sits at a random name.
constexpr int kAttempts = 100;

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

void fill_random(unsigned char* bytes, std::size_t count) {
  std::size_t got = 0;
  while (got < count) {
    const ssize_t n = ::getrandom(bytes + got, count - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      // Kernels without getrandom(2): the C++ library's own source.
      std::random_device device;
      for (; got < count; ++got) bytes[got] = static_cast<unsigned char>(device());
    }
  }
}

[[noreturn]] void cannot_create(const char* what, const std::string& final_path) {
  throw Error(system_error_message(std::string("cannot create a temporary ") + what + " for", final_path));
}

}  // namespace

std::string random_name_suffix(std::size_t count) {
  std::string bytes(count, '\0');
  fill_random(reinterpret_cast<unsigned char*>(bytes.data()), count);
  std::string out(count, 'x');
  // 256 is not a multiple of 62: the slight bias toward the first letters costs no safety here.
  for (std::size_t i = 0; i < count; ++i) out[i] = kAlphabet[static_cast<unsigned char>(bytes[i]) % 62];
  return out;
}

int create_exclusive_file(const std::string& path, mode_t mode) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw Error(system_error_message("cannot create", path));
  return fd;
}

TemporaryFile create_temporary_file(const std::string& final_path, mode_t mode) {
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    TemporaryFile t;
    t.path = final_path + ".tmp." + random_name_suffix();
    t.fd = ::open(t.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (t.fd >= 0) return t;
    if (errno != EEXIST && errno != EINTR) cannot_create("file", final_path);
  }
  errno = EEXIST;
  cannot_create("file", final_path);
}

std::string reserve_temporary_path(const std::string& final_path, mode_t mode) {
  TemporaryFile t = create_temporary_file(final_path, mode);
  if (::close(t.fd) != 0) {
    const std::string message = system_error_message("cannot close", t.path);
    ::unlink(t.path.c_str());
    throw Error(message);
  }
  return t.path;
}

std::string create_temporary_directory(const std::string& final_path) {
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    std::string path = final_path + ".partial." + random_name_suffix();
    // mkdir(2) never follows a symlink at the new name: it fails with EEXIST.
    if (::mkdir(path.c_str(), 0777) == 0) return path;
    if (errno != EEXIST && errno != EINTR) cannot_create("directory", final_path);
  }
  errno = EEXIST;
  cannot_create("directory", final_path);
}

}  // namespace mgt
