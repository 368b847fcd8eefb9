#include "kernels/cuda/grouped_linear_hopper.hpp"

#include <algorithm>
#include <vector>

#include "kernels/cuda/grouped_gemm_hopper.hpp"

namespace mgt::cuda {
namespace {

const char* at_row(ConstFloatView v, int64_t row, int64_t width) {
  return static_cast<const char*>(v.raw()) + row * width * 2;
}

bool all_bf16(ConstFloatView a, std::span<const ConstFloatView> b) {
  return a.type() == FloatType::kBf16 &&
         std::all_of(b.begin(), b.end(), [](const ConstFloatView& v) { return v.type() == FloatType::kBf16; });
}

}  // namespace

// y_g = x_g·W_gᵀ: A = x_g [rows, in], B = W_g [out, in], both read as stored.
bool grouped_linear_forward_hopper(ConstFloatView x, std::span<const ConstFloatView> w,
                                   std::span<const int64_t> group_rows, int64_t in, int64_t out, FloatView y,
                                   cudaStream_t stream) {
  if (!all_bf16(x, w) || y.type() != FloatType::kBf16) return false;
  std::vector<GroupedGemmGroup> groups;
  int64_t r0 = 0;
  for (std::size_t g = 0; g < group_rows.size(); ++g) {
    groups.push_back({at_row(x, r0, in), in, w[g].raw(), in, static_cast<char*>(y.raw()) + r0 * out * 2, out,
                      group_rows[g], out, in});
    r0 += group_rows[g];
  }
  return grouped_gemm_hopper({OperandMajor::kK, OperandMajor::kK, FloatType::kBf16, false}, groups.data(),
                             groups.size(), FloatType::kBf16, stream);
}

// dx_g = dy_g·W_g: A = dy_g [rows, out], B = W_g read as [k = out, n = in].
bool grouped_linear_backward_input_hopper(ConstFloatView dy, std::span<const ConstFloatView> w,
                                          std::span<const int64_t> group_rows, int64_t in, int64_t out,
                                          FloatView dx, cudaStream_t stream) {
  if (!all_bf16(dy, w) || dx.type() != FloatType::kBf16) return false;
  std::vector<GroupedGemmGroup> groups;
  int64_t r0 = 0;
  for (std::size_t g = 0; g < group_rows.size(); ++g) {
    groups.push_back({at_row(dy, r0, out), out, w[g].raw(), in, static_cast<char*>(dx.raw()) + r0 * in * 2, in,
                      group_rows[g], in, out});
    r0 += group_rows[g];
  }
  return grouped_gemm_hopper({OperandMajor::kK, OperandMajor::kMN, FloatType::kBf16, false}, groups.data(),
                             groups.size(), FloatType::kBf16, stream);
}

// dW_g (+)= dy_gᵀ·x_g: A = dy_g read as [k = rows, m = out], B = x_g read as [k = rows, n = in].
bool grouped_linear_backward_weight_hopper(ConstFloatView dy, ConstFloatView x, std::span<const int64_t> group_rows,
                                           int64_t in, int64_t out, std::span<const FloatView> dw, bool accumulate,
                                           cudaStream_t stream) {
  if (!all_bf16(dy, std::span<const ConstFloatView>(&x, 1)) || dw.empty()) return false;
  const FloatType d_type = dw.front().type();
  if ((d_type != FloatType::kF32 && d_type != FloatType::kBf16) ||
      !std::all_of(dw.begin(), dw.end(), [&](const FloatView& v) { return v.type() == d_type; }))
    return false;
  std::vector<GroupedGemmGroup> groups;
  int64_t r0 = 0;
  for (std::size_t g = 0; g < group_rows.size(); ++g) {
    groups.push_back({at_row(dy, r0, out), out, at_row(x, r0, in), in, dw[g].raw(), in, out, in, group_rows[g]});
    r0 += group_rows[g];
  }
  return grouped_gemm_hopper({OperandMajor::kMN, OperandMajor::kMN, d_type, accumulate}, groups.data(),
                             groups.size(), FloatType::kBf16, stream);
}

}  // namespace mgt::cuda
