#include "dist/device_uuids.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>

#include "kernels/cuda/device.hpp"

namespace mgt::dist {

std::vector<std::string> gather_device_uuids(Communicator& group, int cuda_device) {
  // A UUID ("GPU-" and 36 characters, "MIG-" for an instance) travels as a fixed number of int64
  // words, zero-padded.
  constexpr std::size_t kWords = 8;
  constexpr std::size_t kBytes = kWords * sizeof(std::int64_t);
  std::array<std::int64_t, kWords> mine{};
  const std::string uuid = cuda::device_uuid(cuda_device);
  std::memcpy(mine.data(), uuid.data(), std::min(uuid.size(), kBytes - 1));
  std::vector<std::int64_t> all(kWords * static_cast<std::size_t>(group.size()));
  group.all_gather(std::span<const std::int64_t>(mine), std::span<std::int64_t>(all));
  std::vector<std::string> uuids;
  for (std::size_t r = 0; r < static_cast<std::size_t>(group.size()); ++r) {
    char text[kBytes];
    std::memcpy(text, all.data() + r * kWords, kBytes);
    text[kBytes - 1] = '\0';
    uuids.emplace_back(text);
  }
  return uuids;
}

}  // namespace mgt::dist
