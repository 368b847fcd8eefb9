// Backend::record on the GPU: the operations are captured from the backend's stream into a CUDA
// graph, instantiated once, and replayed with a single launch. A capture that fails (an operation
// synchronised, read back or allocated, which a graph cannot hold) leaves nothing behind and
// yields nullptr, so the caller runs the operations directly instead.
#pragma once
#include <cuda_runtime_api.h>

#include <functional>
#include <memory>

#include "kernels/backend.hpp"

namespace mgt::cuda {

// `recording` is true while `run` is being captured (the backend refuses allocations then).
std::unique_ptr<RecordedOperations> record_graph(cudaStream_t stream, const std::function<void()>& run,
                                                 bool& recording);

}  // namespace mgt::cuda
