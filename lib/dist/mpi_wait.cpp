#include "dist/mpi_wait.hpp"

#include <chrono>
#include <thread>

namespace mgt::dist {
namespace {

// Short waits (a collective whose ranks arrive together) stay as fast as MPI's own; a sleep lasts
// its 20 µs plus the kernel's timer slack (50 µs by default), a small delay beside the waits long
// enough to reach it.
constexpr auto kSpin = std::chrono::microseconds(50);
constexpr auto kSleep = std::chrono::microseconds(20);

}  // namespace

int mpi_wait_all(int count, MPI_Request* requests, MPI_Status* statuses) {
  const auto start = std::chrono::steady_clock::now();
  bool spinning = true;
  for (;;) {
    int done = 0;
    const int code = MPI_Testall(count, requests, &done, statuses);
    if (code != MPI_SUCCESS || done) return code;
    if (spinning) {
      spinning = std::chrono::steady_clock::now() - start < kSpin;
    } else {
      std::this_thread::sleep_for(kSleep);
    }
  }
}

int mpi_wait(MPI_Request* request, MPI_Status* status) {
  return mpi_wait_all(1, request, status == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : status);
}

}  // namespace mgt::dist
