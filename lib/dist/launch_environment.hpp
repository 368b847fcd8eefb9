// What the environment says about how this process was launched: whether a process manager
// (MPICH's hydra mpiexec, Slurm's srun --mpi=pmi2, Open MPI's mpirun) started it, and how many
// processes the launcher meant to start. Used to refuse launches where N processes would each
// believe they are rank 0 of a world of 1 (srun without --mpi=pmi2, a plain command in a
// multi-task Slurm allocation, an MPI library that does not match the launcher).
#pragma once
#include <functional>
#include <string>

namespace mgt::dist {

struct LaunchEnvironment {
  // A process manager's variables are present (PMI_RANK, PMI_SIZE, PMI_FD, PMI_PORT, PMIX_RANK,
  // OMPI_COMM_WORLD_SIZE): MPI must be initialised to join the others.
  bool has_process_manager = false;
  // The largest process count a launcher variable states (1 when none does), and that variable
  // as NAME=VALUE for messages.
  int expected_world_size = 1;
  std::string expected_from;
  // What says a PMIx launcher started this process (SLURM_MPI_TYPE=pmix..., or PMIX_RANK), empty
  // otherwise: an MPI library without PMIx support then finds itself alone, whatever the count.
  std::string pmix_from;
  // This process's rank as the launcher numbered it (PMI_RANK, PMIX_RANK, OMPI_COMM_WORLD_RANK,
  // SLURM_PROCID, the first present), 0 when none says. Known before MPI starts: what every rank
  // would report alike about the command line, rank 0 reports for the job.
  int launcher_rank = 0;
};

using EnvironmentLookup = std::function<const char*(const char* name)>;

// Reads the variables through `lookup` (std::getenv by default). Slurm's count is
// SLURM_STEP_NUM_TASKS inside a job step, else SLURM_NTASKS, else SLURM_NPROCS.
LaunchEnvironment read_launch_environment(const EnvironmentLookup& lookup = nullptr);

// One of the launcher's variables (SLURM_NODEID, ...) through `lookup` (std::getenv by default):
// null where it is not set.
const char* launcher_variable(const char* name, const EnvironmentLookup& lookup = nullptr);

// Throws a usage error with a one-line launch instruction when the launcher meant to start
// several processes but this one is alone in its world (naming PMIx when it was the launcher's).
void check_launch(const LaunchEnvironment& launch, int world_size);

}  // namespace mgt::dist
