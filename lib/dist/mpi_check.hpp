// Internal to lib/dist (includes mpi.h): MPI failures as one-line mgt::Error messages naming the
// call, the source location and MPI's own explanation. Communicators are created with
// MPI_ERRORS_RETURN so that failures come back here instead of aborting inside MPI.
#pragma once
#include <mpi.h>

namespace mgt::dist {

[[noreturn]] void throw_mpi_error(int code, const char* call, const char* file, int line);

}  // namespace mgt::dist

#define MGT_MPI_CHECK(call)                                                  \
  do {                                                                       \
    const int mgt_mpi_code_ = (call);                                        \
    if (mgt_mpi_code_ != MPI_SUCCESS) {                                      \
      ::mgt::dist::throw_mpi_error(mgt_mpi_code_, #call, __FILE__, __LINE__); \
    }                                                                        \
  } while (0)
