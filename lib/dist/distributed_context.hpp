// The entry point of a distributed program: start the run, check the layout, build the groups.
//
//   mgt::dist::DistributedContext ctx = mgt::dist::init_distributed(flags);
//   ctx.groups.tensor_model_parallel->all_reduce(std::span(partial), ReduceOp::Sum);
//
// Members are declared so that the groups are destroyed before the runtime finalises MPI.
#pragma once
#include <chrono>
#include <memory>

#include "dist/distributed_runtime.hpp"
#include "dist/memory_mover.hpp"
#include "dist/parallel_layout.hpp"
#include "dist/process_groups.hpp"

namespace mgt::dist {

struct DistributedContext {
  std::unique_ptr<DistributedRuntime> runtime;
  ParallelLayout layout;
  RankCoordinates coordinates;  // of this rank
  ProcessGroups groups;

  int rank() const { return runtime->rank(); }
  int world_size() const { return runtime->world_size(); }
  Communicator& world() const { return runtime->world(); }
};

// Starts the run (see DistributedRuntime::start for the launch modes), checks the flags against
// the world size (usage errors name the flag: "world size (6) is not divisible by
// --tensor-model-parallel-size (4)") and builds this rank's process groups. The watchdog limit
// is --distributed-timeout-minutes. `mover` (may be null) stages device buffers for MPI.
DistributedContext init_distributed(const ParallelFlags& flags, MemoryMover* mover = nullptr);
// Same with the watchdog limit given directly (tests use seconds).
DistributedContext init_distributed(const ParallelFlags& flags,
                                    std::chrono::milliseconds watchdog_timeout,
                                    MemoryMover* mover = nullptr);

}  // namespace mgt::dist
