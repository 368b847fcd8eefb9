#include "dist/nccl_check.hpp"

#include <string>

#include "core/error.hpp"
#include "dist/source_location.hpp"

namespace mgt::dist {

void throw_nccl_error(ncclResult_t result, const char* call, const char* file, int line) {
  std::string reason = ncclGetErrorString(result);
  // The last error NCCL logged on this thread, when it says more than the result code.
  if (const char* last = ncclGetLastError(nullptr); last && *last)
    reason += ": " + std::string(last);
  throw Error("NCCL error: " + call_name(call) + " failed: " + reason + " (" +
              source_location(file, line) + ")");
}

}  // namespace mgt::dist
