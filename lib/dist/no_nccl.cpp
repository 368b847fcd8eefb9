// The NCCL entry points of a build without CUDA or without NCCL.
#include "core/error.hpp"
#include "dist/nccl_communicator.hpp"

namespace mgt::dist {

bool nccl_available() { return false; }

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& /*bootstrap*/,
                                                     const DeviceQueue& /*queue*/,
                                                     const NcclOptions& /*options*/) {
  throw Error("this mgt was built without NCCL (it needs the CUDA toolkit and NCCL at build "
              "time); communicate over MPI instead");
}

}  // namespace mgt::dist
