// Where a GPU backend runs its operations, as the CUDA runtime names them: the device and the
// stream. Work outside the backend queued on that stream (a collective over NCCL) is ordered with
// the backend's operations without the host waiting for either. The stream is a cudaStream_t,
// carried type-erased so that code built without CUDA headers can pass it along.
#pragma once

namespace mgt {

struct DeviceQueue {
  int device = 0;
  void* stream = nullptr;  // cudaStream_t; null: none (the communicator's own, for NCCL)
};

}  // namespace mgt
