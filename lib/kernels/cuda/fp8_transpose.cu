#include "kernels/cuda/fp8_transpose.hpp"

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

}  // namespace

void fp8_transpose(const uint8_t* codes, int64_t rows, int64_t cols, const float* scale, float* scale_inv,
                   uint8_t* transposed, float* transposed_scale_inv, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
  transpose_kernel<<<grid, dim3(kTile, kTileRows), 0, stream>>>(codes, rows, cols, scale, scale_inv, transposed,
                                                                transposed_scale_inv);
  MGT_CUDA_CHECK_LAUNCH(transpose_kernel);
}

}  // namespace mgt::cuda
