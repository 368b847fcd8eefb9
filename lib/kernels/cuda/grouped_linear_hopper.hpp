// Backend::grouped_linear_*'s GEMMs, and Backend::grouped_fp8_linear's, as one grouped GEMM each
// (grouped_gemm_hopper.hpp) where the GPU and the operands allow: bf16 or FP8 operands, rows of
// whole 16-byte vectors. False, with nothing done, elsewhere; the caller then runs a GEMM per
// group.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "kernels/float_view.hpp"
#include "kernels/fp8_view.hpp"

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
// Every group's x·wᵀ·sx·sw in one launch: E4M3 or E5M2 x, E4M3 w, bf16 or fp32 y (added to with
// `accumulate`: fp32 only), fast accumulation for the forward's role only (Fp8GemmRole).
bool grouped_fp8_linear_hopper(std::span<const Fp8LinearGroup> groups, bool accumulate, Fp8GemmRole role,
                               cudaStream_t stream);

}  // namespace mgt::cuda
