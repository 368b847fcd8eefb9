// Mixture-of-Experts routing and the row gathers of token permutation on the GPU, with the
// per-token arithmetic of kernels/moe_routing_math.hpp that the CPU's kernels use
// (kernels/cpu/moe_routing.hpp). The routing in fp32, one thread per token row, so that each is
// the CPU's loop body as it is.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/elements.hpp"
#include "kernels/moe_routing_params.hpp"

namespace mgt::cuda {

// `chosen` and `score_sums`: scratch of tokens·experts floats and moe_route_score_doubles(p) doubles.
int64_t moe_route_score_doubles(const MoeRoutingParams& p);
void moe_route(const float* logits, const MoeRoutingParams& p, float* gates, float* probs, float* routing_map,
               float* aux_counts, double* statistics, bool accumulate, float* chosen, double* score_sums,
               cudaStream_t stream);
// `scratch`: 3·tokens·experts floats.
void moe_route_backward(const float* logits, const MoeRoutingParams& p, const float* d_probs,
                        const float* routing_map, const float* aux_counts, float aux_grad, float z_grad,
                        float* d_logits, float* scratch, cudaStream_t stream);
// Backend::moe_sinkhorn in one block (the rounds follow one another, each reading the whole
// [tokens, experts] matrix from L2); `token_factors`: scratch of `tokens` floats.
void moe_sinkhorn(const float* logits, int64_t tokens, int64_t experts, float* out, float* token_factors,
                  cudaStream_t stream);
// The row gathers and row_dot read and write fp32, bf16 or fp16 storage (elements.hpp).
void gather_rows(In in, int64_t cols, const int64_t* index, int64_t out_rows, In weights, Out out,
                 cudaStream_t stream);
void gather_sum_rows(In in, int64_t cols, const int64_t* index, int64_t out_rows, int64_t k, In weights, Out out,
                     cudaStream_t stream);
void row_dot(In a, In b, int64_t rows, int64_t cols, Out out, cudaStream_t stream);
void scale_rows(In x, In factors, int64_t rows, int64_t cols, Out out, cudaStream_t stream);

}  // namespace mgt::cuda
