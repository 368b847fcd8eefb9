#include "core/process_environment.hpp"

#include <cstdlib>
#include <string>

#include "core/error.hpp"

namespace mgt {

std::optional<int> thread_count_from_environment() {
  if (const char* value = std::getenv("MGT_NUM_THREADS"); value != nullptr && *value != '\0') {
    char* end = nullptr;
    const long n = std::strtol(value, &end, 10);
    if (*end != '\0' || n < 1 || n > 1 << 16)
      throw UsageError(std::string("MGT_NUM_THREADS: expected a whole number of threads from 1, got '") + value + "'");
    return static_cast<int>(n);
  }
  for (const char* name : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    const int n = std::atoi(value);
    if (n >= 1) return n;
  }
  return std::nullopt;
}

}  // namespace mgt
