#include "kernels/cpu/argmax.hpp"

#include "kernels/cpu/require.hpp"

namespace mgt::cpu {

void row_argmax(const float* x, int64_t rows, int64_t cols, int64_t* out, int64_t row_stride) {
  require_nonnegative(rows, "row_argmax", "rows");
  require(cols >= 1, "row_argmax", "cols must be >= 1");
  if (row_stride == 0) row_stride = cols;
  require(row_stride >= cols, "row_argmax", "row_stride must be >= cols");
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * row_stride;
    int64_t best = 0;
    for (int64_t c = 1; c < cols; ++c)
      if (row[c] > row[best]) best = c;
    out[r] = best;
  }
}

}  // namespace mgt::cpu
