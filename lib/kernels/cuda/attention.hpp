// Causal self-attention on the GPU, with the semantics, layouts and saved state of
// kernels/cpu/attention.hpp (grouped-query heads, end-aligned causal mask, lse saved for the
// backward, attention dropout drawn from the same Philox stream as the CPU). Flash-attention
// memory behaviour: no seq_q × seq_kv matrix is ever stored.
#pragma once
#include <cuda_runtime_api.h>

#include "kernels/cpu/attention.hpp"

namespace mgt::cuda {

void attention_forward(const float* q, const float* k, const float* v,
                       const AttentionShape& shape, const AttentionParams& params,
                       float* out, float* lse, cudaStream_t stream);

// dq, dk, dv overwritten (dk, dv summed over the query heads of each group).
void attention_backward(const float* q, const float* k, const float* v, const float* out,
                        const float* dout, const float* lse, const AttentionShape& shape,
                        const AttentionParams& params, float* dq, float* dk, float* dv,
                        cudaStream_t stream);

}  // namespace mgt::cuda
