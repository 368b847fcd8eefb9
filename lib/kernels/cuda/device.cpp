#include "kernels/cuda_device.hpp"

#include <cstdio>

#include <cuda_runtime_api.h>

#include "kernels/cuda_check.hpp"

namespace mgt::cuda {

int visible_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" status
    return 0;
  }
  return count;
}

std::string device_description(int device) {
  cudaDeviceProp prop{};
  MGT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  char memory[32];
  std::snprintf(memory, sizeof memory, "%.1f GiB",
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
         ", " + memory + ")";
}

DeviceMemory device_memory(int device) {
  cudaDeviceProp prop{};
  MGT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  MGT_CUDA_CHECK(cudaSetDevice(device));
  std::size_t free_bytes = 0, total_bytes = 0;
  MGT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return {prop.name, static_cast<std::int64_t>(total_bytes)};
}

std::string device_uuid(int device) {
  cudaDeviceProp prop{};
  MGT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  // nvidia-smi's grouping of the 16 bytes: 8-4-4-4-12 hexadecimal digits.
  std::string text = "GPU";
  for (int i = 0; i < 16; ++i) {
    if (i == 0 || i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(prop.uuid.bytes[i]));
    text += hex;
  }
  return text;
}

}  // namespace mgt::cuda
