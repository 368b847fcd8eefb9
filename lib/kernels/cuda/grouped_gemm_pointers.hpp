// The grouped GEMM's matrix addresses (kernels/cuda/grouped_gemm.hpp) written into device memory
// by a kernel that takes them as its argument: queued on the stream with nothing on the host for
// the device to read later, and kept by value in a recorded graph.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace mgt::cuda {

// dst[i] = pointers[i] for i < n, on `stream`.
void write_device_pointers(const void* const* pointers, std::size_t n, const void** dst, cudaStream_t stream);

}  // namespace mgt::cuda
