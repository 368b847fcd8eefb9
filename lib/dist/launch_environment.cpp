#include "dist/launch_environment.hpp"

#include <cstdlib>
#include <string>

#include "core/error.hpp"

namespace mgt::dist {
namespace {

// A process count from a variable, or 0 when absent or not a positive number.
int count_variable(const EnvironmentLookup& lookup, const char* name) {
  const char* value = lookup(name);
  if (!value || !*value) return 0;
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  if (*end != '\0' || n < 1 || n > 1 << 24) return 0;
  return static_cast<int>(n);
}

}  // namespace

const char* launcher_variable(const char* name, const EnvironmentLookup& lookup) {
  return lookup ? lookup(name) : std::getenv(name);
}

LaunchEnvironment read_launch_environment(const EnvironmentLookup& lookup_or_null) {
  const EnvironmentLookup lookup =
      lookup_or_null ? lookup_or_null : [](const char* name) { return std::getenv(name); };
  LaunchEnvironment launch;
  for (const char* marker :
       {"PMI_RANK", "PMI_SIZE", "PMI_FD", "PMI_PORT", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE"}) {
    const char* value = lookup(marker);
    if (value && *value) launch.has_process_manager = true;
  }
  const char* mpi_type = lookup("SLURM_MPI_TYPE");
  const char* pmix_rank = lookup("PMIX_RANK");
  if (mpi_type && std::string(mpi_type).starts_with("pmix"))
    launch.pmix_from = std::string("SLURM_MPI_TYPE=") + mpi_type;
  else if (pmix_rank && *pmix_rank)
    launch.pmix_from = "PMIX_RANK";
  const auto consider = [&](const char* name) {
    const int n = count_variable(lookup, name);
    if (n > launch.expected_world_size) {
      launch.expected_world_size = n;
      launch.expected_from = std::string(name) + "=" + std::to_string(n);
    }
  };
  // Inside a job step the step's count is the one that applies; a batch script sees the
  // allocation's.
  const char* slurm_count = nullptr;
  for (const char* name : {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"}) {
    if (count_variable(lookup, name) > 0) {
      slurm_count = name;
      break;
    }
  }
  if (slurm_count) consider(slurm_count);
  consider("PMI_SIZE");
  consider("OMPI_COMM_WORLD_SIZE");
  for (const char* name : {"PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}) {
    const char* value = lookup(name);
    if (!value || !*value) continue;
    char* end = nullptr;
    const long rank = std::strtol(value, &end, 10);
    if (*end == '\0' && rank >= 0 && rank < 1 << 24) {
      launch.launcher_rank = static_cast<int>(rank);
      break;
    }
  }
  return launch;
}

void check_launch(const LaunchEnvironment& launch, int world_size) {
  if (world_size != 1 || launch.expected_world_size <= 1) return;
  const std::string n = std::to_string(launch.expected_world_size);
  // MPICH as Debian builds it speaks PMI-1/PMI-2 only: under srun --mpi=pmix each process
  // initialises as a singleton.
  if (!launch.pmix_from.empty())
    throw UsageError("this process is alone in its MPI world, but " + launch.expected_from + " says the job has " + n +
                     " processes: they were started through PMIx (" + launch.pmix_from +
                     "), which this MPI library does not support; launch them with `srun --mpi=pmi2 -n " + n +
                     " PROGRAM ...`");
  throw UsageError("this process is alone in its MPI world, but " + launch.expected_from +
                   " says the job has " + n + " processes; launch them as one job with `srun "
                   "--mpi=pmi2 -n " + n + " PROGRAM ...` or `mpiexec -n " + n +
                   " PROGRAM ...`");
}

}  // namespace mgt::dist
