// Which CUDA devices this process can use.
#pragma once
#include <cstdint>
#include <string>

namespace mgt::cuda {

// Number of CUDA devices visible to the process; 0 when there is no driver or no device (never
// throws: a CPU-only machine is a normal case, not an error).
int visible_device_count();

// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" for logs.
std::string device_description(int device);

// The device's name ("NVIDIA H100 80GB HBM3") and its total memory (cudaMemGetInfo's total, on
// a context of that device), for planning a layout for it.
struct DeviceMemory {
  std::string name;
  std::int64_t total_bytes = 0;
};
DeviceMemory device_memory(int device);

// The device's UUID as nvidia-smi prints it ("GPU-3f2a9c1e-..."; a MIG instance has its own): the
// same in every process that sees the device, whatever its number there, so ranks can tell
// whether they share one.
std::string device_uuid(int device);

}  // namespace mgt::cuda
