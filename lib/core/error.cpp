#include "core/error.hpp"

#include <cerrno>
#include <cstring>

namespace mgt {

std::string system_error_message(const std::string& what, const std::string& path) {
  return what + " '" + path + "': " + std::strerror(errno);
}

}  // namespace mgt
