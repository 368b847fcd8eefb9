#include "dist/backend_memory_mover.hpp"

#include <cstdint>
#include <span>

namespace mgt::dist {

void BackendMemoryMover::copy_to_host(void* host, const void* device, std::size_t bytes) {
  const auto n = static_cast<std::int64_t>(bytes);
  backend_.copy_to_host(DeviceSpan<const std::byte>(static_cast<const std::byte*>(device), n),
                        std::span<std::byte>(static_cast<std::byte*>(host), bytes));
}

void BackendMemoryMover::copy_from_host(void* device, const void* host, std::size_t bytes) {
  const auto n = static_cast<std::int64_t>(bytes);
  backend_.copy_from_host(std::span<const std::byte>(static_cast<const std::byte*>(host), bytes),
                          DeviceSpan<std::byte>(static_cast<std::byte*>(device), n));
}

}  // namespace mgt::dist
