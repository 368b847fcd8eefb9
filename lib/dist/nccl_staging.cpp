#include "dist/nccl_staging.hpp"

#include "core/error.hpp"
#include "kernels/cuda_check.hpp"

namespace mgt::dist {

NcclStaging::~NcclStaging() {
  if (scratch_) cudaFree(scratch_);
}

bool NcclStaging::on_device(const void* data) const {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, data) != cudaSuccess) {
    cudaGetLastError();  // plain host memory may report an error on old drivers; clear it
    return false;
  }
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged) return false;
  if (attributes.device != device_)
    throw Error("a buffer on CUDA device " + std::to_string(attributes.device) + " was given to the " + owner_ +
                " on device " + std::to_string(device_));
  return true;
}

void NcclStaging::reserve(std::size_t total) {
  if (total <= scratch_bytes_) return;
  if (scratch_) MGT_CUDA_CHECK(cudaFree(scratch_));
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  MGT_CUDA_CHECK(cudaMalloc(&scratch_, total));
  scratch_bytes_ = total;
}

DeviceView NcclStaging::view(const void* data, std::size_t bytes, MemorySpace space, std::size_t offset, bool load,
                             cudaStream_t stream) {
  DeviceView v;
  v.bytes = bytes;
  if (bytes == 0 || (space == MemorySpace::Backend && on_device(data))) {
    v.device = const_cast<void*>(data);  // written only for receive buffers
    return v;
  }
  v.device = static_cast<std::byte*>(scratch_) + offset;
  v.host = const_cast<void*>(data);
  if (load) MGT_CUDA_CHECK(cudaMemcpyAsync(v.device, data, bytes, cudaMemcpyHostToDevice, stream));
  return v;
}

void NcclStaging::store(const DeviceView& v, cudaStream_t stream) const {
  if (v.host && v.bytes > 0) MGT_CUDA_CHECK(cudaMemcpyAsync(v.host, v.device, v.bytes, cudaMemcpyDeviceToHost, stream));
}

}  // namespace mgt::dist
