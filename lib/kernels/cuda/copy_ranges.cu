#include "kernels/cuda/copy_ranges.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "kernels/cuda/launch.cuh"

namespace mgt::cuda {
namespace {

// The ranges travel as the kernel's argument (3 KiB, under the 4 KiB every GPU takes): no
// device copy of them to keep or upload, and a recorded graph keeps them by value.
constexpr int kRangesPerLaunch = 128;

struct RangeBatch {
  CopyRange ranges[kRangesPerLaunch];
};

// One range per blockIdx.y.
template <typename Element>
__global__ void copy_ranges_kernel(const Element* src, Element* dst, RangeBatch batch) {
  const CopyRange r = batch.ranges[blockIdx.y];
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < r.count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[r.dst + i] = src[r.src + i];
  }
}

template <typename Element>
void launch(const void* src, void* dst, const CopyRange* ranges, std::size_t count, cudaStream_t stream) {
  for (std::size_t first = 0; first < count; first += kRangesPerLaunch) {
    const std::size_t n = std::min<std::size_t>(kRangesPerLaunch, count - first);
    RangeBatch batch{};
    int64_t longest = 0;
    for (std::size_t i = 0; i < n; ++i) {
      batch.ranges[i] = ranges[first + i];
      longest = std::max(longest, ranges[first + i].count);
    }
    if (longest == 0) continue;
    const dim3 grid(grid_for(longest), static_cast<unsigned>(n));
    copy_ranges_kernel<Element><<<grid, kThreads, 0, stream>>>(static_cast<const Element*>(src),
                                                                static_cast<Element*>(dst), batch);
    MGT_CUDA_CHECK_LAUNCH(copy_ranges_kernel);
  }
}

}  // namespace

void copy_ranges(const void* src, void* dst, int element_bytes, const CopyRange* ranges, std::size_t n,
                 cudaStream_t stream) {
  if (element_bytes == 4) return launch<uint32_t>(src, dst, ranges, n, stream);
  if (element_bytes == 2) return launch<uint16_t>(src, dst, ranges, n, stream);
  throw Error("copy_ranges: elements of " + std::to_string(element_bytes) + " bytes");
}

}  // namespace mgt::cuda
