// Element-wise pieces of the transformer block that need no saved state: bias and residual adds
// and scaling. Each takes explicit sizes; outputs may alias inputs.
#pragma once
#include <cstdint>

namespace mgt::cpu {

// y[rows, cols] += bias[cols].
void add_bias(float* y, const float* bias, int64_t rows, int64_t cols);

// out[n] = a[n] + b[n] (the residual connection), or a[n] + b[n] + c[n] where c is not null (a
// row-parallel output's last addend folded into it). out may alias a or b.
void add(const float* a, const float* b, const float* c, int64_t n, float* out);

// y[n] += x[n] (accumulating a gradient that reaches a tensor along two paths).
void accumulate(float* y, const float* x, int64_t n);

// x[n] *= factor.
void scale(float* x, int64_t n, float factor);

}  // namespace mgt::cpu
