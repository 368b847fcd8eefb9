// How mgt-train's ranks move the compute backend's buffers between them: NCCL between GPUs, MPI
// otherwise, as Megatron's --distributed-backend and the ranks' devices decide. Pure functions of
// what every rank knows alike, so every rank decides the same and the decision can be checked
// anywhere.
//
// NCCL needs a device backend (the CPU backend's buffers are host memory, MPI's own), a build
// with NCCL, and a GPU per rank: it refuses a communicator with two ranks on one device, which is
// how tools/gpu/parallel_one_gpu.sh runs the layouts, so those runs stay on MPI, staging device
// buffers through host memory. A world of one rank has nothing to communicate.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "dist/parallel_layout.hpp"

namespace mgt::dist {

// Megatron's --distributed-backend: nccl (its default) or gloo, which mgt's MPI stands in for;
// mgt also takes mpi.
enum class DistributedBackend { Nccl, Mpi };

// "nccl" → Nccl; "gloo", "mpi" → Mpi; anything else a usage error naming the flag.
DistributedBackend parse_distributed_backend(const std::string& value);

struct TransportInputs {
  DistributedBackend requested = DistributedBackend::Nccl;  // --distributed-backend
  int world_size = 1;
  bool device_backend = false;  // the compute backend is a GPU's (it has a DeviceQueue)
  bool nccl_built = false;      // nccl_available()
  // find_shared_device's finding, once looked for: only worth gathering the devices when the
  // rest says NCCL (wants_nccl).
  std::optional<std::string> shared_device;
};

struct TransportChoice {
  bool nccl = false;
  // The start-up line naming the transport and why; empty for a world of one rank.
  std::string line;
};

// NCCL when nothing above rules it out, shared_device included.
bool wants_nccl(const TransportInputs& in);
TransportChoice choose_transport(const TransportInputs& in);

// The first group of `layout` (tensor-, data-, pipeline-, model-parallel, embedding) with two
// ranks on one device, described for the start-up line; nullopt when the ranks of every group
// have devices of their own. device_of_rank[r]: world rank r's device, by an identity that is
// the same in every process (its UUID).
std::optional<std::string> find_shared_device(const ParallelLayout& layout,
                                              const std::vector<std::string>& device_of_rank);

}  // namespace mgt::dist
