// Many independent GEMMs in one launch on Hopper's tensor cores (a mixture's experts, each over its
// own rows), as Megatron-Core's GroupedMLP runs them through a grouped GEMM. Every group's output
// tiles go into one list that the GPU's multiprocessors work through, so no group ends in a partly
// filled wave and one group's epilogue overlaps another's main loop; one GEMM per group, even side
// by side on several streams, leaves both to chance.
//
// Group g computes D_g[m_g, n_g] = A_g·B_gᵀ (+ D_g with `accumulate`), A_g [m_g, k_g] and
// B_g [n_g, k_g] in bf16, accumulated in fp32 and rounded once into D (bf16 or fp32). Each operand
// is a row-major matrix read as stored (kK: A stored [m, k], B stored [n, k]) or transposed
// (kMN: A stored [k, m], B stored [k, n]), which gives the linear layer's three GEMMs:
//   forward  y = x·Wᵀ   A = x [rows, in] kK,   B = W [out, in] kK
//   input    dx = dy·W  A = dy [rows, out] kK, B = W [out, in] read as [k = out, n = in]: kMN
//   weight   dW = dyᵀ·x A = dy read as [k = rows, m = out]: kMN, B = x read as [k = rows, n = in]: kMN
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstddef>

#include "kernels/float_view.hpp"

namespace mgt::cuda {

enum class OperandMajor { kK, kMN };

struct GroupedGemmGroup {
  const void* a = nullptr;  // row-major, leading dimension a_ld elements
  int64_t a_ld = 0;
  const void* b = nullptr;
  int64_t b_ld = 0;
  void* d = nullptr;  // row-major [m, n], leading dimension d_ld elements
  int64_t d_ld = 0;
  int64_t m = 0, n = 0, k = 0;  // a group with m or n of 0 is skipped; with k of 0, D = 0 (or kept)
};

struct GroupedGemmShape {
  OperandMajor a_major = OperandMajor::kK;
  OperandMajor b_major = OperandMajor::kK;
  FloatType d_type = FloatType::kBf16;  // kBf16 or kF32
  bool accumulate = false;
};

// Whether the current GPU runs the kernel: compute capability 9.0 (it holds sm_90a code only).
bool grouped_gemm_hopper_available();

// False, with nothing done, where the kernel does not apply: not available, operands not bf16, a
// leading dimension or a stored row's length not a multiple of 8 elements (TMA moves rows in
// 16-byte units), a base address not 16-byte aligned, a bf16 D added to, or too few tiles for a
// long k (below 3/4 of the GPU busy; cuBLAS splits k there).
bool grouped_gemm_hopper(const GroupedGemmShape& shape, const GroupedGemmGroup* groups,
                         std::size_t count, FloatType operand_type, cudaStream_t stream);

}  // namespace mgt::cuda
