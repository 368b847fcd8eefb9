#include "kernels/cuda/attention_merge.hpp"

#include "kernels/cuda_check.hpp"

namespace mgt::cuda {
namespace {

constexpr int kThreads = 256;

// One warp per (batch, head, row): lane 0's merged lse is shared through the shuffle, then the
// lanes scale the row's head_dim elements.
__global__ void attention_merge_kernel(const float* part_out, const float* part_lse, HeadTensor whole,
                                       int64_t first_row, int64_t part_rows, float* out, float* lse) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  const int64_t rows = whole.batch * whole.heads * part_rows;
  if (warp >= rows) return;
  const int64_t i = warp % part_rows;
  const int64_t bh = warp / part_rows;
  const int64_t b = bh / whole.heads;
  const int64_t h = bh % whole.heads;
  float* l = lse + bh * whole.seq + first_row + i;
  const float old_lse = *l;
  const float pl = part_lse[bh * part_rows + i];
  const float hi = fmaxf(old_lse, pl);
  const float lo = fminf(old_lse, pl);
  const float merged = (isinf(lo) && lo < 0.0f) ? hi : hi + log1pf(expf(lo - hi));
  const float keep = (isinf(old_lse) && old_lse < 0.0f) ? 0.0f : expf(old_lse - merged);
  const float take = expf(pl - merged);
  HeadTensor part = whole;
  part.seq = part_rows;
  float* o = out + whole.offset(first_row + i, b, h);
  const float* p = part_out + part.offset(i, b, h);
  for (int64_t d = lane; d < whole.head_dim; d += 32) o[d] = o[d] * keep + p[d] * take;
  __syncwarp();
  if (lane == 0) *l = merged;
}

}  // namespace

void attention_merge(const float* part_out, const float* part_lse, const HeadTensor& whole, int64_t first_row,
                     int64_t part_rows, float* out, float* lse, cudaStream_t stream) {
  const int64_t rows = whole.batch * whole.heads * part_rows;
  if (rows == 0 || whole.head_dim == 0) return;
  const int64_t blocks = (rows * 32 + kThreads - 1) / kThreads;
  attention_merge_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(part_out, part_lse, whole,
                                                                                first_row, part_rows, out, lse);
  MGT_CUDA_CHECK_LAUNCH(attention_merge_kernel);
}

}  // namespace mgt::cuda
