// Communicators over NCCL, for device memory on a CUDA device. Available when mgt was built with
// the CUDA toolkit and NCCL (nccl_available()); otherwise the factories throw mgt::Error.
//
// Each NCCL communicator mirrors an existing communicator of the same ranks (an MPI group, or a
// LocalCommunicator for a group of one): group rank 0 creates NCCL's unique id and broadcasts it
// over that communicator, then the ranks join. Operations run on the communicator's own CUDA
// stream and return once complete, like every Communicator operation. Buffers in device memory
// (backend_buffer / DeviceSpan) are used in place; host buffers are staged through device
// memory. NCCL cannot check point-to-point counts: a send and its recv must agree.
#pragma once
#include <memory>

#include "dist/communicator.hpp"
#include "dist/process_groups.hpp"

namespace mgt::dist {

bool nccl_available();

// Collective over `bootstrap`'s group. Reports to `bootstrap`'s watchdog.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int cuda_device);

// NCCL communicators for every group of `bootstrap` (the embedding group stays null where it
// is null). Collective over the world; every rank passes its own CUDA device.
ProcessGroups make_nccl_process_groups(const ProcessGroups& bootstrap, int cuda_device);

}  // namespace mgt::dist
