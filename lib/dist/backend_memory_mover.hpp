// A MemoryMover over a compute backend's own transfers, so that the MPI communicator can stage
// a GPU backend's buffers (the CPU backend needs no mover, but works with one).
#pragma once
#include "dist/memory_mover.hpp"
#include "kernels/backend.hpp"

namespace mgt::dist {

class BackendMemoryMover final : public MemoryMover {
public:
  // `backend` must outlive the mover.
  explicit BackendMemoryMover(Backend& backend) : backend_(backend) {}

  void copy_to_host(void* host, const void* device, std::size_t bytes) override;
  void copy_from_host(void* device, const void* host, std::size_t bytes) override;

private:
  Backend& backend_;
};

}  // namespace mgt::dist
