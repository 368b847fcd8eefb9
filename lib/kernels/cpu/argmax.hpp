// Index of the largest value of each row's first cols elements, the first on ties
// (torch.argmax); NaN never wins. Rows are row_stride elements apart (0: cols).
#pragma once
#include <cstdint>

namespace mgt::cpu {

void row_argmax(const float* x, int64_t rows, int64_t cols, int64_t* out, int64_t row_stride = 0);

}  // namespace mgt::cpu
