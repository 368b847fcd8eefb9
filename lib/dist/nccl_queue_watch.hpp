// The collective watchdog's view of the NCCL operations left queued on the caller's stream
// (nccl_communicator.hpp): such an operation returns at once, so it stays watched until an event
// recorded after it has completed. A peer that never joins it then still ends the job, wherever
// the host next waits for the stream, outside any communicator call.
#pragma once
#include <cuda_runtime_api.h>

#include <deque>
#include <optional>

#include "dist/collective_watchdog.hpp"
#include "dist/nccl_event_pool.hpp"

namespace mgt::dist {

class NcclQueueWatch {
public:
  // `watchdog` null: nothing is watched. `device`: the communicator's.
  NcclQueueWatch(CollectiveWatchdog* watchdog, int device) : watchdog_(watchdog), device_(device) {}
  NcclQueueWatch(const NcclQueueWatch&) = delete;
  NcclQueueWatch& operator=(const NcclQueueWatch&) = delete;
  // Ends every watch (the caller has drained the streams first).
  ~NcclQueueWatch();

  // Watches `op`, just queued on `stream`, until the stream has passed it.
  void watch(const InFlightOperation& op, cudaStream_t stream);
  // Ends the watch of the queued operations that have run (they run in queue order).
  void retire_completed();

private:
  // An operation queued on the caller's stream, watched until `done` has completed.
  struct Queued {
    cudaEvent_t done = nullptr;
    std::optional<CollectiveWatchdog::Scope> watch;
  };
  void release_oldest();

  CollectiveWatchdog* watchdog_;
  int device_;
  CudaEventPool events_{cudaEventDisableTiming};
  std::deque<Queued> queued_;  // oldest first
};

}  // namespace mgt::dist
