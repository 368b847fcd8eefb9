#include "kernels/cpu/attention_merge.hpp"

#include <algorithm>
#include <cmath>

namespace mgt::cpu {

void attention_merge(const float* part_out, const float* part_lse, const HeadTensor& whole, int64_t first_row,
                     int64_t part_rows, float* out, float* lse) {
  HeadTensor part = whole;
  part.seq = part_rows;
  for (int64_t b = 0; b < whole.batch; ++b)
    for (int64_t h = 0; h < whole.heads; ++h)
      for (int64_t i = 0; i < part_rows; ++i) {
        float& l = lse[(b * whole.heads + h) * whole.seq + first_row + i];
        const float pl = part_lse[(b * whole.heads + h) * part_rows + i];
        // log(e^l + e^pl) = max + log1p(e^(min − max)), as TransformerEngine's LSE correction.
        const float hi = std::max(l, pl);
        const float lo = std::min(l, pl);
        const float merged = std::isinf(lo) && lo < 0 ? hi : hi + std::log1p(std::exp(lo - hi));
        const float keep = std::isinf(l) && l < 0 ? 0.0f : std::exp(l - merged);
        const float take = std::exp(pl - merged);
        float* o = out + whole.offset(first_row + i, b, h);
        const float* p = part_out + part.offset(i, b, h);
        for (int64_t d = 0; d < whole.head_dim; ++d) o[d] = o[d] * keep + p[d] * take;
        l = merged;
      }
}

}  // namespace mgt::cpu
