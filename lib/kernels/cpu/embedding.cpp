#include "kernels/cpu/embedding.hpp"

#include <algorithm>

#include "kernels/cpu/require.hpp"

namespace mgt::cpu {
namespace {

void check(int64_t n, int64_t vocab_start, int64_t local_rows, int64_t hidden, const char* name) {
  require_nonnegative(n, name, "n");
  require_nonnegative(vocab_start, name, "vocab_start");
  require_nonnegative(local_rows, name, "local_rows");
  require_nonnegative(hidden, name, "hidden");
}

}  // namespace

void embedding_forward(const int64_t* ids, int64_t n, const float* table, int64_t vocab_start,
                       int64_t local_rows, int64_t hidden, float* out) {
  check(n, vocab_start, local_rows, hidden, "embedding_forward");
  for (int64_t t = 0; t < n; ++t) {
    const int64_t row = ids[t] - vocab_start;
    float* dst = out + t * hidden;
    if (row >= 0 && row < local_rows) {
      std::copy_n(table + row * hidden, hidden, dst);
    } else {
      std::fill_n(dst, hidden, 0.0f);
    }
  }
}

void embedding_backward(const int64_t* ids, int64_t n, const float* dout, int64_t vocab_start,
                        int64_t local_rows, int64_t hidden, float* dtable) {
  check(n, vocab_start, local_rows, hidden, "embedding_backward");
  for (int64_t t = 0; t < n; ++t) {
    const int64_t row = ids[t] - vocab_start;
    if (row < 0 || row >= local_rows) continue;
    const float* src = dout + t * hidden;
    float* dst = dtable + row * hidden;
    for (int64_t i = 0; i < hidden; ++i) dst[i] += src[i];
  }
}

}  // namespace mgt::cpu
