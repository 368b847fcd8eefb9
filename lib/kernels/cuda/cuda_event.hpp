// Backend::record_event and record_timed_event on the GPU: a CUDA event recorded on the backend's
// stream (without timing, the cheap kind, unless `timed`); wait() blocks the host until the
// stream has passed it.
#pragma once
#include <cuda_runtime_api.h>

#include <memory>

#include "kernels/backend.hpp"

namespace mgt::cuda {

std::unique_ptr<QueueEvent> record_event(cudaStream_t stream, bool timed = false);

}  // namespace mgt::cuda
