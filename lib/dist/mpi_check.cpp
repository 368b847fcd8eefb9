#include "dist/mpi_check.hpp"

#include <string>

#include "core/error.hpp"
#include "dist/source_location.hpp"

namespace mgt::dist {

void throw_mpi_error(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  const std::string reason = length > 0 ? std::string(text, static_cast<size_t>(length))
                                        : "error code " + std::to_string(code);
  throw Error("MPI error: " + call_name(call) + " failed: " + reason + " (" +
              source_location(file, line) + ")");
}

}  // namespace mgt::dist
