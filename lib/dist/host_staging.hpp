// Host memory for a buffer that a host-memory transport (MPI) must read or write: the buffer
// itself when it is host memory, or a staging copy moved by the MemoryMover when it lives in a
// device backend's memory.
#pragma once
#include <cstddef>
#include <memory>

#include "dist/comm_buffer.hpp"
#include "dist/memory_mover.hpp"

namespace mgt::dist {

class HostStaging {
public:
  // `mover` null: backend memory is host memory (the CPU backend) and is used in place.
  // `load`: the operation reads the buffer, so a staging copy starts with its contents.
  HostStaging(MemoryMover* mover, const void* data, std::size_t bytes, MemorySpace space,
              bool load);
  HostStaging(MemoryMover* mover, SendBuffer buffer)
      : HostStaging(mover, buffer.data, buffer.bytes(), buffer.space, true) {}
  HostStaging(MemoryMover* mover, RecvBuffer buffer, bool load)
      : HostStaging(mover, buffer.data, buffer.bytes(), buffer.space, load) {}

  void* host() const { return host_; }
  // Copies a staged buffer back to where it lives (nothing to do for host memory).
  void store() const;

private:
  MemoryMover* mover_;  // null when no staging is needed
  void* original_;
  std::size_t bytes_;
  std::unique_ptr<std::byte[]> staging_;
  void* host_;
};

}  // namespace mgt::dist
