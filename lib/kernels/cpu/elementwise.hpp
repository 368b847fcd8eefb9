// Element-wise pieces of the transformer block that need no saved state: bias and residual adds
// and scaling. Each takes explicit sizes; outputs may alias inputs.
#pragma once
#include <cstdint>

namespace mgt::cpu {

// y[rows, cols] += bias[cols].
void add_bias(float* y, const float* bias, int64_t rows, int64_t cols);

// out[n] = a[n] + b[n] (the residual connection). out may alias a or b.
void add(const float* a, const float* b, int64_t n, float* out);

// y[n] += x[n] (accumulating a gradient that reaches a tensor along two paths).
void accumulate(float* y, const float* x, int64_t n);

// x[n] *= factor.
void scale(float* x, int64_t n, float factor);

}  // namespace mgt::cpu
