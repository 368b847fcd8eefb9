// Which CUDA devices this process can use.
#pragma once
#include <string>

namespace mgt::cuda {

// Number of CUDA devices visible to the process; 0 when there is no driver or no device (never
// throws: a CPU-only machine is a normal case, not an error).
int visible_device_count();

// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" for logs.
std::string device_description(int device);

}  // namespace mgt::cuda
