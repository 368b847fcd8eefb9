// One step of key/value-cached decoding on the GPU (Backend::cached_attention), one kernel: each
// new query's attention over the cached keys and this step's, with one block per (position,
// sequence, head) and the keys split across its warps, which also stores this step's keys and
// values into the caches at their length. The cache's length is read on the device, so a
// recorded decode step replays at any length.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/elements.hpp"

#include "kernels/cpu/attention.hpp"

namespace mgt::cuda {

// The largest head_dim the kernel holds in registers.
constexpr int64_t kCachedAttentionMaxHeadDim = 256;

// shape.seq_kv is the caches' capacity; q [seq_q, batch, heads, head_dim] (already rotated),
// k, v [seq_q, batch, groups, head_dim]; out like q. Positions past the capacity are not written.
void cached_attention(In q, In k, In v, FloatView key_cache, FloatView value_cache, const int64_t* length,
                      const AttentionShape& shape, float softmax_scale, Out out, cudaStream_t stream);

}  // namespace mgt::cuda
