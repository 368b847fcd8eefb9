// Mixture-of-Experts routing and the row gathers of token permutation on the CPU: the reference
// kernels of Backend::moe_route, moe_route_backward, gather_rows, gather_sum_rows and row_dot
// (kernels/backend.hpp states their contracts).
#pragma once
#include <cstdint>

#include "kernels/moe_routing_params.hpp"

namespace mgt::cpu {

void moe_route(const float* logits, const MoeRoutingParams& p, float* gates, float* probs, float* routing_map,
               float* aux_counts, double* statistics, bool accumulate);
void moe_route_backward(const float* logits, const MoeRoutingParams& p, const float* d_probs,
                        const float* routing_map, const float* aux_counts, float aux_grad, float z_grad,
                        float* d_logits);
// Backend::moe_sinkhorn, with fp32 sums in index order.
void moe_sinkhorn(const float* logits, int64_t tokens, int64_t experts, float* out);
void gather_rows(const float* in, int64_t in_rows, int64_t cols, const int64_t* index, int64_t out_rows,
                 const float* weights, float* out);
void gather_sum_rows(const float* in, int64_t in_rows, int64_t cols, const int64_t* index, int64_t out_rows,
                     int64_t k, const float* weights, float* out);
void row_dot(const float* a, const float* b, int64_t rows, int64_t cols, float* out);
void scale_rows(const float* x, const float* factors, int64_t rows, int64_t cols, float* out);

// The factor on d(Σ_e P_e·f_e)/d score of moe_route_backward's auxiliary loss: Megatron's
// num_experts / (tokens² · topk) for aux_loss, num_experts / (batch · seq² · topk) for seq_aux_loss,
// over all p.aux_partitions (moe_math::aux_loss_factor).
float moe_aux_factor(const MoeRoutingParams& p);
double moe_aux_factor_double(const MoeRoutingParams& p);

}  // namespace mgt::cpu
