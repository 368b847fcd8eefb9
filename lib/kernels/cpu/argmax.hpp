// Index of the largest value of each row, the first on ties (torch.argmax); NaN never wins.
#pragma once
#include <cstdint>

namespace mgt::cpu {

void row_argmax(const float* x, int64_t rows, int64_t cols, int64_t* out);

}  // namespace mgt::cpu
