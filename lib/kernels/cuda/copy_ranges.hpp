// Many small device-to-device copies in one launch per 128 of them (Backend::copy_ranges): the
// sequence-parallel parameters' gradients, a few hundred vectors of a few thousand elements,
// packed for one all-reduce and back. One cudaMemcpyAsync each costs more in launches than in
// bytes.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/copy_range.hpp"

namespace mgt::cuda {

// dst[r.dst + i] = src[r.src + i] for i < r.count and each of the n ranges, elements of
// element_bytes (2 or 4) each.
void copy_ranges(const void* src, void* dst, int element_bytes, const CopyRange* ranges, std::size_t n,
                 cudaStream_t stream);

}  // namespace mgt::cuda
