// Megatron's linear layer y = x · Wᵀ + b with W stored [out, in] (torch.nn.Linear layout), and the
// three pieces of its backward. Column- and row-parallel linears call these on their local shard
// of W; the communication around them belongs to the caller.
#pragma once
#include <cstdint>

namespace mgt::cpu {

// y[rows, out] = x[rows, in] · w[out, in]ᵀ (+ bias[out] when bias is not null).
void linear_forward(const float* x, const float* w, const float* bias, int64_t rows, int64_t in,
                    int64_t out, float* y);

// dx[rows, in] = dy[rows, out] · w[out, in]. Overwrites dx.
void linear_backward_input(const float* dy, const float* w, int64_t rows, int64_t in, int64_t out,
                           float* dx);

// dw[out, in] += dy[rows, out]ᵀ · x[rows, in]. Accumulates, so micro-batches can add up into one
// gradient buffer without a temporary; without `accumulate`, dw = dyᵀ·x.
void linear_backward_weight(const float* dy, const float* x, int64_t rows, int64_t in, int64_t out,
                            float* dw, bool accumulate = true);

// dbias[cols] += Σ_rows dy[rows, cols], or without `accumulate` dbias = Σ_rows dy.
void bias_backward(const float* dy, int64_t rows, int64_t cols, float* dbias, bool accumulate = true);

// The same products in fp64 (the MoE router's gating layer under --moe-router-dtype fp64): each
// sum in double, rounded once to float. y = x · wᵀ (no bias); dx = dy · w where dx is not null,
// and dw (+)= dyᵀ · x, dw's old value added in double before the rounding.
void linear_forward_fp64(const float* x, const float* w, int64_t rows, int64_t in, int64_t out, float* y);
void linear_backward_fp64(const float* dy, const float* x, const float* w, int64_t rows, int64_t in, int64_t out,
                          float* dx, float* dw, bool accumulate);

}  // namespace mgt::cpu
