// Moves and index-driven operations on the GPU: the embedding gather (its gradient is in
// embedding_backward.hpp), Megatron's fused QKV layout, rotary position embedding — as
// kernels/cpu/{embedding,qkv_layout,rotary}.hpp define them.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/elements.hpp"

#include "kernels/operation_params.hpp"
#include "kernels/cpu/rotary.hpp"

namespace mgt::cuda {

void embedding_forward(const int64_t* ids, int64_t n, In table, int64_t vocab_start,
                       int64_t local_rows, int64_t hidden, Out out, cudaStream_t stream);

void qkv_split(In mixed, int64_t tokens, int64_t heads, int64_t groups, int64_t unit,
               Out q, Out k, Out v, cudaStream_t stream);
void qkv_merge(In q, In k, In v, int64_t tokens, int64_t heads,
               int64_t groups, int64_t unit, Out mixed, cudaStream_t stream);

// sign = +1 for the forward rotation, −1 for the backward (its transpose). y may alias x.
// offset_on_device, when not null, is added to params.position_offset as the kernel reads it
// (a key/value cache's length in a recorded decode step).
void rotary(In x, const HeadTensor& shape, const RotaryParams& params,
            float sign, Out y, cudaStream_t stream, const int64_t* offset_on_device = nullptr);

}  // namespace mgt::cuda
