// Backend::grouped_linear_*'s GEMMs as one grouped GEMM each (grouped_gemm_hopper.hpp) where the
// GPU and the operands allow: bf16 operands, rows of whole 16-byte vectors. False, with nothing
// done, elsewhere; the caller then runs a GEMM per group.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "kernels/float_view.hpp"

namespace mgt::cuda {

bool grouped_linear_forward_hopper(ConstFloatView x, std::span<const ConstFloatView> w,
                                   std::span<const int64_t> group_rows, int64_t in, int64_t out, FloatView y,
                                   cudaStream_t stream);
bool grouped_linear_backward_input_hopper(ConstFloatView dy, std::span<const ConstFloatView> w,
                                          std::span<const int64_t> group_rows, int64_t in, int64_t out,
                                          FloatView dx, cudaStream_t stream);
bool grouped_linear_backward_weight_hopper(ConstFloatView dy, ConstFloatView x, std::span<const int64_t> group_rows,
                                           int64_t in, int64_t out, std::span<const FloatView> dw, bool accumulate,
                                           cudaStream_t stream);

}  // namespace mgt::cuda
