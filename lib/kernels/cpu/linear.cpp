#include "kernels/cpu/linear.hpp"

#include <algorithm>

#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/require.hpp"

namespace mgt::cpu {
namespace {

void check_sizes(int64_t rows, int64_t in, int64_t out, const char* name) {
  require_nonnegative(rows, name, "rows");
  require_nonnegative(in, name, "in");
  require_nonnegative(out, name, "out");
}

}  // namespace

void linear_forward(const float* x, const float* w, const float* bias, int64_t rows, int64_t in,
                    int64_t out, float* y) {
  check_sizes(rows, in, out, "linear_forward");
  gemm(Trans::kNo, Trans::kYes, rows, out, in, 1.0f, x, w, 0.0f, y);
  if (bias != nullptr) add_bias(y, bias, rows, out);
}

void linear_backward_input(const float* dy, const float* w, int64_t rows, int64_t in, int64_t out,
                           float* dx) {
  check_sizes(rows, in, out, "linear_backward_input");
  gemm(Trans::kNo, Trans::kNo, rows, in, out, 1.0f, dy, w, 0.0f, dx);
}

void linear_backward_weight(const float* dy, const float* x, int64_t rows, int64_t in, int64_t out,
                            float* dw, bool accumulate) {
  check_sizes(rows, in, out, "linear_backward_weight");
  gemm(Trans::kYes, Trans::kNo, out, in, rows, 1.0f, dy, x, accumulate ? 1.0f : 0.0f, dw);
}

void bias_backward(const float* dy, int64_t rows, int64_t cols, float* dbias, bool accumulate) {
  require_nonnegative(rows, "bias_backward", "rows");
  require_nonnegative(cols, "bias_backward", "cols");
  if (!accumulate) std::fill(dbias, dbias + cols, 0.0f);
  // Row by row keeps the inner loop contiguous (and vectorisable) over the columns.
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = dy + r * cols;
    for (int64_t c = 0; c < cols; ++c) dbias[c] += row[c];
  }
}

void linear_forward_fp64(const float* x, const float* w, int64_t rows, int64_t in, int64_t out, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double sum = 0.0;
      for (int64_t i = 0; i < in; ++i) sum += static_cast<double>(x[r * in + i]) * static_cast<double>(w[o * in + i]);
      y[r * out + o] = static_cast<float>(sum);
    }
  }
}

void linear_backward_fp64(const float* dy, const float* x, const float* w, int64_t rows, int64_t in, int64_t out,
                          float* dx, float* dw, bool accumulate) {
  if (dx != nullptr) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < in; ++i) {
        double sum = 0.0;
        for (int64_t o = 0; o < out; ++o) sum += static_cast<double>(dy[r * out + o]) * static_cast<double>(w[o * in + i]);
        dx[r * in + i] = static_cast<float>(sum);
      }
    }
  }
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      double sum = accumulate ? static_cast<double>(dw[o * in + i]) : 0.0;
      for (int64_t r = 0; r < rows; ++r) sum += static_cast<double>(dy[r * out + o]) * static_cast<double>(x[r * in + i]);
      dw[o * in + i] = static_cast<float>(sum);
    }
  }
}

}  // namespace mgt::cpu
