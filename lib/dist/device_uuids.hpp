// Which physical GPU each rank computes on, as every process names it alike (its UUID), for
// find_shared_device (transport_choice.hpp): device numbers cannot tell, since each process
// numbers the devices it sees from 0.
#pragma once
#include <string>
#include <vector>

#include "dist/communicator.hpp"

namespace mgt::dist {

// Every group rank's device UUID, in group-rank order, `cuda_device` being this rank's CUDA
// device number. Collective over `group`; host memory only.
std::vector<std::string> gather_device_uuids(Communicator& group, int cuda_device);

}  // namespace mgt::dist
