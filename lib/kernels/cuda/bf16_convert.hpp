// Copies between the backend's fp32 tensors and bf16 scratch tensors, for library calls that take
// bf16 operands (cuDNN attention). Several tensors go in one launch, so that converting q, k and
// v costs one kernel, not three.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <initializer_list>

namespace mgt::cuda {

// n elements from src to dst; bf16 elements are raw 16-bit words.
struct Bf16Copy {
  const void* src;
  void* dst;
  int64_t n;
};

constexpr int kMaxBf16Copies = 8;

// dst (bf16) = src (fp32) rounded to nearest even; at most kMaxBf16Copies copies.
void fp32_to_bf16(std::initializer_list<Bf16Copy> copies, cudaStream_t stream);
// dst (fp32) = src (bf16), exactly.
void bf16_to_fp32(std::initializer_list<Bf16Copy> copies, cudaStream_t stream);

// dst[0] = a, dst[1] = b, in stream order: a library's RNG seed and offset, which it reads from
// device memory.
void store_int64_pair(int64_t* dst, int64_t a, int64_t b, cudaStream_t stream);

}  // namespace mgt::cuda
