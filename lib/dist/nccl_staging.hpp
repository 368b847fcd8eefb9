// The NCCL communicator's device view of its buffers (nccl_communicator.hpp): NCCL reads and
// writes device memory only, so a host buffer (or a CPU backend's memory) is staged through a
// scratch allocation on the communicator's device, and its results are copied back. Buffers
// already on that device are used in place: a gradient buffer of gigabytes never gets a copy.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

#include "dist/comm_buffer.hpp"

namespace mgt::dist {

// A buffer as NCCL sees it: device memory, either the caller's or a staged copy of host memory
// in the scratch allocation.
struct DeviceView {
  void* device = nullptr;
  void* host = nullptr;  // non-null when staged: where results go back to
  std::size_t bytes = 0;
};

class NcclStaging {
public:
  // Scratch offsets stay aligned to this for every element type.
  static constexpr std::size_t kAlign = 256;
  static std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

  // `owner`: the communicator, for messages ("NCCL tensor-model-parallel group [0, 1]").
  NcclStaging(int device, std::string owner) : device_(device), owner_(std::move(owner)) {}
  NcclStaging(const NcclStaging&) = delete;
  NcclStaging& operator=(const NcclStaging&) = delete;
  ~NcclStaging();

  // Whether `data` is memory of this device (false for host memory); a buffer on another device
  // is an error naming both.
  bool on_device(const void* data) const;
  // Host buffers, and backend buffers that are a CPU backend's host memory.
  bool needs_staging(SendBuffer b) const {
    return b.count > 0 && !(b.space == MemorySpace::Backend && on_device(b.data));
  }
  // Reserves scratch for both buffers when either needs staging (the offsets view() is given
  // assume both are staged).
  void reserve_for(SendBuffer a, SendBuffer b = {}) {
    if (needs_staging(a) || needs_staging(b)) reserve(aligned(a.bytes()) + aligned(b.bytes()) + kAlign);
  }
  // Reserves `total` bytes of scratch (grown, never shrunk).
  void reserve(std::size_t total);
  void* scratch() const { return scratch_; }

  // The device view of `data`: in place on this device, else at `offset` in the scratch (the
  // caller reserved enough), loaded from `data` on `stream` when the operation reads it.
  DeviceView view(const void* data, std::size_t bytes, MemorySpace space, std::size_t offset, bool load,
                  cudaStream_t stream);
  // Queues the copy of a staged view's results back to the host on `stream`.
  void store(const DeviceView& v, cudaStream_t stream) const;

private:
  int device_;
  std::string owner_;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
};

}  // namespace mgt::dist
