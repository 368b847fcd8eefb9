#include "dist/distributed_context.hpp"

namespace mgt::dist {

DistributedContext init_distributed(const ParallelFlags& flags, MemoryMover* mover) {
  validate_parallel_flags(flags);
  return init_distributed(flags, flags.distributed_timeout(), mover);
}

DistributedContext init_distributed(const ParallelFlags& flags,
                                    std::chrono::milliseconds watchdog_timeout,
                                    MemoryMover* mover) {
  validate_parallel_flags(flags);
  auto runtime = DistributedRuntime::start(watchdog_timeout);
  ParallelLayout layout(flags, runtime->world_size());
  const RankCoordinates coordinates = layout.coordinates(runtime->rank());
  ProcessGroups groups = make_process_groups(*runtime, layout, mover);
  return DistributedContext{std::move(runtime), layout, coordinates, std::move(groups)};
}

}  // namespace mgt::dist
