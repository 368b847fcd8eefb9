// LayerNorm over the last dimension: y = (x − mean) · rstd · weight + bias with
// rstd = 1/sqrt(var + eps) and the biased (population) variance, as torch.nn.LayerNorm and
// Megatron's fused kernels compute it.
#pragma once
#include <cstdint>

namespace mgt::cpu {

// x, y: [rows, hidden]; weight, bias: [hidden] (bias may be null); mean, rstd: [rows], saved for
// the backward so it need not recompute statistics.
void layer_norm_forward(const float* x, const float* weight, const float* bias, int64_t rows,
                        int64_t hidden, float eps, float* y, float* mean, float* rstd);

// dx = rstd · (g − mean(g) − x̂ · mean(g · x̂)) with g = dy · weight, x̂ = (x − mean) · rstd.
// dx is overwritten (or added to, with accumulate_dx: a residual's gradient); dweight += Σ_rows
// dy · x̂ and dbias += Σ_rows dy accumulate (dbias may be null).
// Under sequence parallelism the caller all-reduces dweight/dbias across the tensor-parallel group.
void layer_norm_backward(const float* dy, const float* x, const float* weight, const float* mean,
                         const float* rstd, int64_t rows, int64_t hidden, float* dx,
                         float* dweight, float* dbias, bool accumulate_dx = false);

}  // namespace mgt::cpu
