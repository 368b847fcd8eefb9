#include "kernels/cuda/embedding_backward.hpp"

#include <cub/device/device_radix_sort.cuh>

#include "core/error.hpp"
#include "kernels/cuda/launch.cuh"

namespace mgt::cuda {
namespace {

// The parts of the scratch: sort keys (local rows, local_rows for other ranks' ids) and values
// (token indices) in and out, then cub's own storage.
struct Parts {
  int32_t* keys_in;
  int32_t* keys_out;
  int32_t* tokens_in;
  int32_t* tokens_out;
  void* sort_storage;
  size_t sort_bytes;
};

size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

int key_bits(int64_t local_rows) {
  int bits = 1;
  while ((int64_t{1} << bits) <= local_rows) ++bits;
  return bits;
}

size_t sort_bytes(int64_t n, int64_t local_rows) {
  size_t bytes = 0;
  MGT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const int32_t*>(nullptr),
                                                 static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                                 static_cast<int32_t*>(nullptr), static_cast<int>(n), 0,
                                                 key_bits(local_rows)));
  return bytes;
}

Parts carve(void* scratch, int64_t n, int64_t local_rows) {
  auto* p = static_cast<char*>(scratch);
  const size_t array = aligned(static_cast<size_t>(n) * sizeof(int32_t));
  Parts parts{};
  parts.keys_in = reinterpret_cast<int32_t*>(p);
  parts.keys_out = reinterpret_cast<int32_t*>(p + array);
  parts.tokens_in = reinterpret_cast<int32_t*>(p + 2 * array);
  parts.tokens_out = reinterpret_cast<int32_t*>(p + 3 * array);
  parts.sort_storage = p + 4 * array;
  parts.sort_bytes = sort_bytes(n, local_rows);
  return parts;
}

__global__ void sort_keys_kernel(const int64_t* ids, int64_t n, int64_t vocab_start, int64_t local_rows,
                                 int32_t* keys, int32_t* tokens) {
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < n;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = ids[t] - vocab_start;
    keys[t] = static_cast<int32_t>(row >= 0 && row < local_rows ? row : local_rows);
    tokens[t] = static_cast<int32_t>(t);
  }
}

// Block p handles the run of equal keys that starts at sorted position p, if one does.
__global__ void row_sums_kernel(const int32_t* keys, const int32_t* tokens, int64_t n, int64_t local_rows,
                                In dout, int64_t hidden, float* dtable) {
  const int64_t p = blockIdx.x;
  const int32_t row = keys[p];
  if (row == local_rows || (p > 0 && keys[p - 1] == row)) return;
  int64_t end = p + 1;
  while (end < n && keys[end] == row) ++end;
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
    float sum = 0.0f;
    for (int64_t q = p; q < end; ++q) sum += dout[tokens[q] * hidden + c];
    dtable[row * hidden + c] += sum;
  }
}

}  // namespace

size_t embedding_backward_scratch_bytes(int64_t n, int64_t local_rows) {
  return 4 * aligned(static_cast<size_t>(n) * sizeof(int32_t)) + sort_bytes(n, local_rows);
}

void embedding_backward(const int64_t* ids, int64_t n, In dout, int64_t vocab_start, int64_t local_rows,
                        int64_t hidden, float* dtable, void* scratch, size_t scratch_bytes, cudaStream_t stream) {
  if (n == 0 || hidden == 0) return;
  if (n > INT32_MAX || local_rows >= INT32_MAX)
    throw Error("embedding_backward: " + std::to_string(n) + " tokens or " + std::to_string(local_rows) +
                " rows exceed the 32-bit sort");
  const Parts parts = carve(scratch, n, local_rows);
  if (scratch_bytes < embedding_backward_scratch_bytes(n, local_rows)) throw Error("embedding_backward: scratch too small");
  sort_keys_kernel<<<grid_for(n), kThreads, 0, stream>>>(ids, n, vocab_start, local_rows, parts.keys_in,
                                                          parts.tokens_in);
  MGT_CUDA_CHECK_LAUNCH(sort_keys_kernel);
  size_t bytes = parts.sort_bytes;
  MGT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(parts.sort_storage, bytes, parts.keys_in, parts.keys_out,
                                                 parts.tokens_in, parts.tokens_out, static_cast<int>(n), 0,
                                                 key_bits(local_rows), stream));
  row_sums_kernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(parts.keys_out, parts.tokens_out, n,
                                                                      local_rows, dout, hidden, dtable);
  MGT_CUDA_CHECK_LAUNCH(row_sums_kernel);
}

}  // namespace mgt::cuda
