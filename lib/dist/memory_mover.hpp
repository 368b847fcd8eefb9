// How a communicator that works on host memory (MPI) reaches a compute backend's device memory:
// it copies the elements to a host staging buffer, communicates, and copies results back.
// A GPU backend supplies one; the CPU backend needs none (its memory is host memory).
#pragma once
#include <cstddef>

namespace mgt::dist {

class MemoryMover {
public:
  MemoryMover() = default;
  MemoryMover(const MemoryMover&) = delete;
  MemoryMover& operator=(const MemoryMover&) = delete;
  virtual ~MemoryMover() = default;

  // Both return when the copy is complete (any work pending on `device` is ordered before it);
  // failures throw mgt::Error.
  virtual void copy_to_host(void* host, const void* device, std::size_t bytes) = 0;
  virtual void copy_from_host(void* device, const void* host, std::size_t bytes) = 0;
};

}  // namespace mgt::dist
