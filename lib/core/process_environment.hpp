// The process settings the library takes from the environment. Configuration reaches the
// library as typed options built from flags (BackendOptions, dist::CommunicationOptions); the
// environment is read only here, for settings that belong to the process rather than to a run
// (how many threads it may use, as for OpenBLAS and OpenMP), and in dist/launch_environment.hpp,
// for what the launcher (mpiexec, srun) says about the job. The man pages' ENVIRONMENT sections
// list both.
#pragma once
#include <optional>

namespace mgt {

// The threads a CPU backend may use: MGT_NUM_THREADS, else OPENBLAS_NUM_THREADS, else
// OMP_NUM_THREADS (its first number: OpenMP allows a list), where set and not empty; nullopt
// when none is. A value of MGT_NUM_THREADS that is not a whole number from 1 is a usage error
// naming it; the other libraries' variables are taken as those libraries take them (a value
// below 1 is passed over).
std::optional<int> thread_count_from_environment();

}  // namespace mgt
