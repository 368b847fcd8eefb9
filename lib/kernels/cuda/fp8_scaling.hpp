// Transformer Engine's delayed-scaling update on the GPU (Backend::fp8_scaling_update): the amax
// histories rolled in place and the scales recomputed, with the arithmetic of
// fp8_delayed_scaling_update (kernels/fp8.cpp), so that both backends agree bit for bit.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mgt::cuda {

// history [history_len, tensors] and scale [tensors], fp32 in device memory; the amax taken is the
// largest of the history (max_algo, --fp8-amax-compute-algo max) or its row 0 (most_recent).
void fp8_scaling_update(float* history, float* scale, int64_t tensors, int64_t history_len, bool max_algo,
                        float scaled_max, cudaStream_t stream);

}  // namespace mgt::cuda
