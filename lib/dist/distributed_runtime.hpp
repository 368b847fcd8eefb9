// The distributed run of this process: MPI's lifetime, the world, the collective watchdog, and
// the creation of process groups. One per process.
//
// Launch modes:
//   mpiexec -n N PROGRAM       (MPICH hydra) — MPI is initialised, world = N
//   srun --mpi=pmi2 PROGRAM    (Slurm)       — MPI is initialised, world = the step's tasks
//   PROGRAM                    (no launcher) — MPI is not touched at all; the world is this one
//                                              process and every group is a LocalCommunicator,
//                                              so a single-rank run is cheap and cannot hang.
// A process that finds itself alone while the launcher environment announces several processes
// (srun without --mpi=pmi2, a plain command inside a multi-task allocation) stops with a usage
// error that says how to launch (see launch_environment.hpp).
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dist/collective_watchdog.hpp"
#include "dist/communicator.hpp"
#include "dist/launch_environment.hpp"
#include "dist/memory_mover.hpp"

namespace mgt::dist {

class DistributedRuntime {
public:
  // Starts the run as the environment describes (see above). Every communication that lasts
  // longer than `timeout` ends the whole job (CollectiveWatchdog; tests pass seconds).
  // Throws a usage error for a bad launch and mgt::Error when MPI fails to start.
  static std::unique_ptr<DistributedRuntime> start(std::chrono::milliseconds timeout);
  // Same, with the launch environment given (tests).
  static std::unique_ptr<DistributedRuntime> start(std::chrono::milliseconds timeout,
                                                   const LaunchEnvironment& launch);

  // Finalises MPI (under the watchdog, so a peer that never arrives cannot hang the exit). When
  // destroyed by an escaping error it leaves MPI unfinalised instead: finalising could wait on
  // ranks still inside a collective, while a process that exits with an error makes mpiexec end
  // the job at once.
  ~DistributedRuntime();
  DistributedRuntime(const DistributedRuntime&) = delete;
  DistributedRuntime& operator=(const DistributedRuntime&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  // False for a lone process started without a launcher.
  bool uses_mpi() const { return uses_mpi_; }

  // All ranks, on host memory.
  Communicator& world() { return *world_; }
  CollectiveWatchdog& watchdog() { return *watchdog_; }

  // Collective over the world: every rank passes the same list of disjoint groups (world ranks,
  // in group-rank order). Returns this rank's communicator, named `kind` in messages, or null
  // when this rank is in none of the groups. `mover` (may be null) stages device buffers; it
  // must outlive the communicator.
  std::unique_ptr<Communicator> split(const std::string& kind,
                                      const std::vector<std::vector<int>>& groups,
                                      MemoryMover* mover = nullptr);

private:
  DistributedRuntime() = default;

  bool uses_mpi_ = false;
  int rank_ = 0;
  int world_size_ = 1;
  std::unique_ptr<CollectiveWatchdog> watchdog_;
  std::unique_ptr<Communicator> world_;
};

}  // namespace mgt::dist
