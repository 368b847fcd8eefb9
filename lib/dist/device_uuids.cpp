#include "dist/device_uuids.hpp"

#include "kernels/cuda_device.hpp"

namespace mgt::dist {

std::vector<std::string> gather_device_uuids(Communicator& group, int cuda_device) {
  // A UUID is "GPU-" and 36 characters ("MIG-" for an instance).
  return all_gather_text(group, cuda::device_uuid(cuda_device), 63);
}

}  // namespace mgt::dist
