// Communicators over NCCL, for device memory on a CUDA device. Available when mgt was built with
// the CUDA toolkit and NCCL (nccl_available()); otherwise the factories throw mgt::Error.
//
// Each NCCL communicator mirrors an existing communicator of the same ranks (an MPI group, or a
// LocalCommunicator for a group of one): group rank 0 creates NCCL's unique id and broadcasts it
// over that communicator, then the ranks join.
//
// Where operations run:
//   - given a DeviceQueue with a stream (a compute backend's, Backend::device_queue()), an
//     operation on device buffers of that device is queued on that stream and returns at once:
//     it runs after the work queued there before it and before the work queued after it, with no
//     host synchronisation (stream_ordered(); see communicator.hpp). It stays watched by the
//     collective watchdog until it has run. The stream must outlive the communicator;
//   - given a device only, operations run on the communicator's own stream and return once
//     complete. Nothing orders them after other streams' work: the caller synchronises first.
// Host buffers (and a CPU backend's memory) are staged through device memory, on the same stream,
// and every operation that stages returns complete. NCCL cannot check point-to-point counts: a
// send and its recv must agree.
#pragma once
#include <memory>

#include "dist/communicator.hpp"
#include "dist/process_groups.hpp"
#include "kernels/device_queue.hpp"

namespace mgt::dist {

bool nccl_available();

struct NcclOptions {
  // > 0: NCCL's kernels use at most that many thread blocks, each on a multiprocessor of its own
  // (NCCL's choice otherwise).
  int max_ctas = 0;
  // Collectives over registered buffers (Communicator::register_buffer) on the copy engines,
  // reading the peers' memory directly, where the ranks share one machine (nccl_peer_copy.hpp).
  bool peer_copies = true;
};

// Collective over `bootstrap`'s group. Reports to `bootstrap`'s watchdog. `queue.stream` null:
// the communicator's own stream.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, const DeviceQueue& queue,
                                                     const NcclOptions& options = {});
inline std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int cuda_device) {
  return make_nccl_communicator(bootstrap, DeviceQueue{cuda_device, nullptr});
}

// NCCL communicators for every group of `bootstrap` (the embedding group stays null where it
// is null). Collective over the world; every rank passes its own device (and stream).
// `data_parallel_max_ctas` > 0 caps the data-parallel communicator's thread blocks (collectives
// overlapped with the compute: Backend::leave_multiprocessors); `peer_copies` (NcclOptions)
// applies to every group.
ProcessGroups make_nccl_process_groups(const ProcessGroups& bootstrap, const DeviceQueue& queue,
                                       int data_parallel_max_ctas = 0, bool peer_copies = true);
inline ProcessGroups make_nccl_process_groups(const ProcessGroups& bootstrap, int cuda_device) {
  return make_nccl_process_groups(bootstrap, DeviceQueue{cuda_device, nullptr});
}

}  // namespace mgt::dist
