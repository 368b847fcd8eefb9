// Internal to lib/dist (includes mpi.h): completing MPI requests without holding a core while the
// other ranks catch up. MPI's own waits (and its blocking collectives) poll without pause; where
// ranks share cores (CPU ranks on a workstation or a CI machine, more ranks than cores) the
// waiting ranks then take the time slices the awaited rank needs: a 4-rank run on 2 cores took
// 2.3–3.0 s against 1.15–1.35 s with waits that sleep between polls. mgt's MPI operations start
// nonblocking calls and complete them here.
#pragma once
#include <mpi.h>

namespace mgt::dist {

// Completes the `count` requests (MPI_Testall until all are done), as MPI_Waitall does: polling
// without pause for the first kSpinMicroseconds, then with a short sleep after each poll. Only
// a poll advances MPI's progress here, so a wait longer than the spin ends up to one sleep after
// its transfer. `statuses` may be MPI_STATUSES_IGNORE. Returns MPI's code (MPI_SUCCESS when done).
int mpi_wait_all(int count, MPI_Request* requests, MPI_Status* statuses);

// One request: mpi_wait_all of it.
int mpi_wait(MPI_Request* request, MPI_Status* status);

}  // namespace mgt::dist
