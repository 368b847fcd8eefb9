// The embedding table's gradient on the GPU, deterministic: the tokens are sorted by their row
// (a stable radix sort, so tokens of one row keep their order), then one block per row sums its
// tokens' gradients in token order and adds the sum to the row once. No two runs differ, unlike a
// scatter with atomic additions, whose order follows the scheduler.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/elements.hpp"

namespace mgt::cuda {

// Bytes of device scratch embedding_backward needs for n tokens.
size_t embedding_backward_scratch_bytes(int64_t n, int64_t local_rows);

// dtable[row − vocab_start] += Σ of dout's rows of the tokens with that id, for the ids in
// [vocab_start, vocab_start + local_rows); the others are skipped (another rank's rows).
void embedding_backward(const int64_t* ids, int64_t n, In dout, int64_t vocab_start, int64_t local_rows,
                        int64_t hidden, float* dtable, void* scratch, size_t scratch_bytes, cudaStream_t stream);

}  // namespace mgt::cuda
