#include "kernels/cuda/moe_permutation.hpp"

#include "kernels/cuda/launch.cuh"

namespace mgt::cuda {
namespace {

constexpr int kPermutationThreads = 1024;
constexpr int kWarps = kPermutationThreads / 32;

__device__ __forceinline__ void set_status(int64_t* status, int64_t bits) {
  atomicOr(reinterpret_cast<unsigned long long*>(status), static_cast<unsigned long long>(bits));
}

// The rows of expert `e` once padded.
__device__ __forceinline__ int64_t padded_rows(int64_t routed, const MoePermutation& p) {
  const int64_t rows = routed > p.capacity ? routed : p.capacity;
  return (rows + p.row_multiple - 1) / p.row_multiple * p.row_multiple;
}

// One block per expert of the range: its routed tokens, padded, into expert_rows[j]; block 0
// clears the status.
__global__ void __launch_bounds__(kPermutationThreads)
    expert_counts_kernel(const float* map, MoePermutation p, int64_t* expert_rows) {
  __shared__ int warp_counts[kWarps];
  const int64_t e = p.first + blockIdx.x;
  int n = 0;
  for (int64_t t = threadIdx.x; t < p.tokens; t += kPermutationThreads) n += map[t * p.experts + e] > 0.0f ? 1 : 0;
  n = static_cast<int>(__reduce_add_sync(0xffffffffu, static_cast<unsigned>(n)));
  if (threadIdx.x % 32 == 0) warp_counts[threadIdx.x / 32] = n;
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t routed = 0;
    for (int w = 0; w < kWarps; ++w) routed += warp_counts[w];
    expert_rows[blockIdx.x] = padded_rows(routed, p);
    if (blockIdx.x == 0) expert_rows[p.count] = kMoePermutationOk;
  }
}

// One block per expert of the range: its routed tokens in token order (a block-wide scan of the
// map's column, chunk by chunk) after the rows of the experts before it, then its padding rows;
// the last block also marks the rows past the last as empty.
__global__ void __launch_bounds__(kPermutationThreads)
    expert_rows_kernel(const float* map, MoePermutation p, int64_t max_rows, int64_t* expert_rows,
                       int64_t* row_token, int64_t* row_slot, int64_t* slot_row) {
  __shared__ int warp_offsets[kWarps + 1];
  __shared__ int64_t first_row;
  const int64_t j = blockIdx.x;
  const int64_t e = p.first + j;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    int64_t before = 0, total = 0;
    for (int64_t i = 0; i < p.count; ++i) {
      if (i < j) before += expert_rows[i];
      total += expert_rows[i];
    }
    first_row = before;
    if (j == 0 && total > max_rows) set_status(expert_rows + p.count, kMoePermutationTooManyRows);
  }
  __syncthreads();
  int64_t routed = 0;  // the same in every thread
  for (int64_t chunk = 0; chunk < p.tokens; chunk += kPermutationThreads) {
    const int64_t t = chunk + threadIdx.x;
    const bool on = t < p.tokens && map[t * p.experts + e] > 0.0f;
    const unsigned ballot = __ballot_sync(0xffffffffu, on);
    if (lane == 0) warp_offsets[warp + 1] = __popc(ballot);
    __syncthreads();
    if (threadIdx.x == 0) {
      warp_offsets[0] = 0;
      for (int w = 1; w <= kWarps; ++w) warp_offsets[w] += warp_offsets[w - 1];
    }
    __syncthreads();
    if (t < p.tokens) {
      int64_t r = -1;
      if (on) {
        r = first_row + routed + warp_offsets[warp] + __popc(ballot & ((1u << lane) - 1u));
        if (r < max_rows) {
          row_token[r] = t;
          row_slot[r] = t * p.experts + e;
        } else {
          r = -1;
        }
      }
      slot_row[t * p.experts + e] = r;
    }
    routed += warp_offsets[kWarps];
    __syncthreads();  // warp_offsets is reused by the next chunk
  }
  const int64_t end = first_row + expert_rows[j];
  for (int64_t r = first_row + routed + threadIdx.x; r < end && r < max_rows; r += kPermutationThreads) {
    row_token[r] = -1;
    row_slot[r] = -1;
  }
  if (j == p.count - 1)
    for (int64_t r = end + threadIdx.x; r < max_rows; r += kPermutationThreads) {
      row_token[r] = -1;
      row_slot[r] = -1;
    }
}

// One thread per token: its rows in expert order (slot_row of the range's experts), −1 for the
// experts outside the range.
__global__ void token_rows_kernel(MoePermutation p, int64_t* token_rows, int64_t* slot_row, int64_t* status) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.tokens) return;
  int64_t n = 0;
  for (int64_t e = 0; e < p.experts; ++e) {
    int64_t* slot = slot_row + t * p.experts + e;
    if (e < p.first || e >= p.first + p.count) {
      *slot = -1;
      continue;
    }
    if (*slot < 0) continue;
    if (n < p.topk) token_rows[t * p.topk + n] = *slot;
    ++n;
  }
  for (int64_t i = n; i < p.topk; ++i) token_rows[t * p.topk + i] = -1;
  if (n > p.topk) set_status(status, kMoePermutationTooManyExperts);
}

}  // namespace

void moe_permutation(const float* routing_map, const MoePermutation& p, int64_t max_rows, int64_t* row_token,
                     int64_t* row_slot, int64_t* token_rows, int64_t* slot_row, int64_t* expert_rows,
                     cudaStream_t stream) {
  if (p.count == 0) {
    MGT_CUDA_CHECK(cudaMemsetAsync(expert_rows, 0, sizeof(int64_t), stream));
    // Nothing routed: every table empty (−1: all bits set).
    MGT_CUDA_CHECK(cudaMemsetAsync(row_token, 0xff, static_cast<size_t>(max_rows) * sizeof(int64_t), stream));
    MGT_CUDA_CHECK(cudaMemsetAsync(row_slot, 0xff, static_cast<size_t>(max_rows) * sizeof(int64_t), stream));
    MGT_CUDA_CHECK(cudaMemsetAsync(token_rows, 0xff, static_cast<size_t>(p.tokens * p.topk) * sizeof(int64_t), stream));
    MGT_CUDA_CHECK(cudaMemsetAsync(slot_row, 0xff, static_cast<size_t>(p.tokens * p.experts) * sizeof(int64_t), stream));
    return;
  }
  const auto blocks = static_cast<unsigned>(p.count);
  expert_counts_kernel<<<blocks, kPermutationThreads, 0, stream>>>(routing_map, p, expert_rows);
  MGT_CUDA_CHECK_LAUNCH(expert_counts_kernel);
  expert_rows_kernel<<<blocks, kPermutationThreads, 0, stream>>>(routing_map, p, max_rows, expert_rows, row_token,
                                                                 row_slot, slot_row);
  MGT_CUDA_CHECK_LAUNCH(expert_rows_kernel);
  if (p.tokens > 0) {
    token_rows_kernel<<<grid_for(p.tokens), kThreads, 0, stream>>>(p, token_rows, slot_row, expert_rows + p.count);
    MGT_CUDA_CHECK_LAUNCH(token_rows_kernel);
  }
}

}  // namespace mgt::cuda
