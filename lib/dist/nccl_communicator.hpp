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
#include <string>
#include <vector>

#include "dist/communicator.hpp"
#include "dist/process_groups.hpp"
#include "kernels/device_queue.hpp"

namespace mgt::dist {

bool nccl_available();

struct NcclOptions {
  // Collectives over registered buffers (Communicator::register_buffer) on the copy engines,
  // reading the peers' memory directly, where the ranks share one node (nccl_peer_copy.hpp).
  bool peer_copies = true;
  // The node of each world rank (node_membership.hpp, mgt-train's --simulated-nodes applied);
  // empty: found from the launcher over the group itself.
  std::vector<int> node_of_world_rank;
};

// Where the data-parallel group's collectives over the gradient and weight buffers run when its
// ranks share a machine (mgt-train's --dp-collectives).
enum class DataParallelCollectives {
  kCopyEngines,  // the GPUs' copy engines (nccl_peer_copy.hpp), leaving the multiprocessors to the compute
  kNccl,         // NCCL's kernels
};

// "copy-engines" or "nccl"; a usage error naming --dp-collectives otherwise.
DataParallelCollectives parse_data_parallel_collectives(const std::string& value);

// How a program's NCCL groups communicate, from its flags.
struct CommunicationOptions {
  DataParallelCollectives data_parallel = DataParallelCollectives::kCopyEngines;
  // As NcclOptions::node_of_world_rank, for every group.
  std::vector<int> node_of_world_rank;
};

// Collective over `bootstrap`'s group. Reports to `bootstrap`'s watchdog. `queue.stream` null:
// the communicator's own stream.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, const DeviceQueue& queue,
                                                     const NcclOptions& options = {});
inline std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int cuda_device) {
  return make_nccl_communicator(bootstrap, DeviceQueue{cuda_device, nullptr});
}

// NCCL communicators for every group of `bootstrap` (the embedding group stays null where it
// is null). Collective over the world; every rank passes its own device (and stream). The other
// groups' shared buffers (the tensor-parallel group's under sequence parallelism) move on the
// copy engines wherever they can: on two H200s at the 1.3B shape, TP=2 with sequence parallelism
// ran at 84-86% of one GPU's per-GPU rate that way against 76-78% in NCCL's kernels.
ProcessGroups make_nccl_process_groups(const ProcessGroups& bootstrap, const DeviceQueue& queue,
                                       const CommunicationOptions& options = {});
inline ProcessGroups make_nccl_process_groups(const ProcessGroups& bootstrap, int cuda_device) {
  return make_nccl_process_groups(bootstrap, DeviceQueue{cuda_device, nullptr});
}

}  // namespace mgt::dist
