#include "kernels/cuda/fp8_transpose.hpp"

#include <cstdint>

#include "kernels/cuda/launch.cuh"

namespace mgt::cuda {
namespace {

constexpr int kTile = 32;
constexpr int kTileRows = 8;

// One 32×32 tile per block through shared memory, so that both the reads of the rows and the
// writes of the columns are coalesced; the first thread of the grid writes the two factors.
__global__ void __launch_bounds__(kTile * kTileRows)
    transpose_kernel(const uint8_t* codes, int64_t rows, int64_t cols, const float* scale, float* scale_inv,
                     uint8_t* transposed, float* transposed_scale_inv) {
  __shared__ uint8_t tile[kTile][kTile + 4];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile;
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int64_t row = row0 + i;
    if (row < rows && col < cols) tile[i][threadIdx.x] = codes[row * cols + col];
  }
  __syncthreads();
  const int64_t out_col = row0 + threadIdx.x;  // a row of codes
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int64_t out_row = static_cast<int64_t>(blockIdx.x) * kTile + i;  // a column of codes
    if (out_row < cols && out_col < rows) transposed[out_row * rows + out_col] = tile[threadIdx.x][i];
  }
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 && threadIdx.y == 0) {
    const float inverse = __fdiv_rn(1.0f, *scale);
    *scale_inv = inverse;
    *transposed_scale_inv = inverse;
  }
}


// Tiles of 64×64 codes moved four bytes at a time, for shapes whose rows and columns are whole
// tiles (a norm's FP8 output of 8192 × 2048, most weights): each thread loads four words of the
// tile unconditionally (in flight together) and writes four words of its transpose, each gathered
// from four rows of the tile in shared memory. The byte-wise kernel above moves one code per
// access (about 0.8 TB/s on such shapes on an H200).
constexpr int kWideTile = 64;

__global__ void __launch_bounds__(256)
    transpose_wide_kernel(const uint8_t* codes, int64_t rows, int64_t cols, const float* scale, float* scale_inv,
                          uint8_t* transposed, float* transposed_scale_inv) {
  __shared__ uint8_t tile[kWideTile][kWideTile + 4];
  const int word = threadIdx.x % 16;  // a word of four codes within a tile row
  const int line = threadIdx.x / 16;  // the first of the tile rows this thread moves (every 16th)
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kWideTile;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kWideTile;
  uint32_t loaded[4];
#pragma unroll
  for (int k = 0; k < 4; ++k)
    loaded[k] = *reinterpret_cast<const uint32_t*>(codes + (row0 + line + 16 * k) * cols + col0 + 4 * word);
#pragma unroll
  for (int k = 0; k < 4; ++k) *reinterpret_cast<uint32_t*>(&tile[line + 16 * k][4 * word]) = loaded[k];
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int j = line + 16 * k;  // a column of the tile: a row of the transpose
    const uint32_t w = static_cast<uint32_t>(tile[4 * word][j]) | static_cast<uint32_t>(tile[4 * word + 1][j]) << 8 |
                       static_cast<uint32_t>(tile[4 * word + 2][j]) << 16 |
                       static_cast<uint32_t>(tile[4 * word + 3][j]) << 24;
    *reinterpret_cast<uint32_t*>(transposed + (col0 + j) * rows + row0 + 4 * word) = w;
  }
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
    const float inverse = __fdiv_rn(1.0f, *scale);
    *scale_inv = inverse;
    *transposed_scale_inv = inverse;
  }
}

}  // namespace

void fp8_transpose(const uint8_t* codes, int64_t rows, int64_t cols, const float* scale, float* scale_inv,
                   uint8_t* transposed, float* transposed_scale_inv, cudaStream_t stream) {
  if (rows % kWideTile == 0 && cols % kWideTile == 0 && reinterpret_cast<uintptr_t>(codes) % 4 == 0 &&
      reinterpret_cast<uintptr_t>(transposed) % 4 == 0) {
    const dim3 wide(static_cast<unsigned>(cols / kWideTile), static_cast<unsigned>(rows / kWideTile));
    transpose_wide_kernel<<<wide, 256, 0, stream>>>(codes, rows, cols, scale, scale_inv, transposed,
                                                     transposed_scale_inv);
    MGT_CUDA_CHECK_LAUNCH(transpose_wide_kernel);
    return;
  }
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
  transpose_kernel<<<grid, dim3(kTile, kTileRows), 0, stream>>>(codes, rows, cols, scale, scale_inv, transposed,
                                                                transposed_scale_inv);
  MGT_CUDA_CHECK_LAUNCH(transpose_kernel);
}

}  // namespace mgt::cuda
