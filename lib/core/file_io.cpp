#include "core/file_io.hpp"

#include <unistd.h>

#include <cerrno>

#include "core/error.hpp"

namespace mgt {

void write_all(int fd, const void* data, std::size_t size, const std::string& path_for_errors,
               const char* what) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(system_error_message(what, path_for_errors));
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

}  // namespace mgt
