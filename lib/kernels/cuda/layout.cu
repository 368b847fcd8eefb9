#include "kernels/cuda/layout.hpp"

#include <cstdint>

#include "kernels/cuda/launch.cuh"

namespace mgt::cuda {
namespace {

__global__ void embedding_forward_kernel(const int64_t* ids, int64_t n, In table,
                                         int64_t vocab_start, int64_t local_rows, int64_t hidden,
                                         Out out) {
  const int64_t total = n * hidden;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / hidden;
    const int64_t row = ids[t] - vocab_start;
    out[i] = row >= 0 && row < local_rows ? table[row * hidden + i % hidden] : 0.0f;
  }
}

// Thread x of the grid's x dimension owns position x of every token's mixed row: which of q, k,
// v it maps to and where is worked out once (32-bit arithmetic), then the thread walks the
// tokens of its y slice. `to_mixed` picks the direction. Ptr is Out (elements of either type)
// or uint4* (16-byte vectors of one type: `unit` then counts vectors), since the layout only
// moves values.
template <typename Ptr>
__global__ void qkv_kernel(Ptr mixed, Ptr q, Ptr k, Ptr v, int64_t tokens, int heads, int groups,
                           int unit, bool to_mixed) {
  const int per_group = heads / groups;
  const int group_width = (per_group + 2) * unit;
  const int row = (heads + 2 * groups) * unit;
  const int within = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (within >= row) return;
  const int g = within / group_width;
  const int at = within - g * group_width;
  Ptr part;
  int64_t part_row;  // elements of the part's tensor per token
  if (at < per_group * unit) {
    part = q + (static_cast<int64_t>(g) * per_group * unit + at);
    part_row = static_cast<int64_t>(heads) * unit;
  } else if (at < (per_group + 1) * unit) {
    part = k + (static_cast<int64_t>(g) * unit + (at - per_group * unit));
    part_row = static_cast<int64_t>(groups) * unit;
  } else {
    part = v + (static_cast<int64_t>(g) * unit + (at - (per_group + 1) * unit));
    part_row = static_cast<int64_t>(groups) * unit;
  }
  for (int64_t t = blockIdx.y; t < tokens; t += gridDim.y) {
    const int64_t i = t * row + within;
    if (to_mixed) {
      mixed[i] = part[t * part_row];
    } else {
      part[t * part_row] = mixed[i];
    }
  }
}

// The kernel over rows of `row` elements: the row split evenly over as few blocks as fit it, in
// whole warps.
template <typename Ptr>
void launch_qkv_kernel(Ptr mixed, Ptr q, Ptr k, Ptr v, int64_t tokens, int64_t heads,
                       int64_t groups, int64_t unit, bool to_mixed, cudaStream_t stream) {
  const int64_t row = (heads + 2 * groups) * unit;
  const int64_t blocks = (row + kThreads - 1) / kThreads;
  const int64_t threads = ((row + blocks - 1) / blocks + 31) / 32 * 32;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(tokens < 65535 ? tokens : 65535));
  qkv_kernel<<<grid, static_cast<unsigned>(threads), 0, stream>>>(
      mixed, q, k, v, tokens, static_cast<int>(heads), static_cast<int>(groups),
      static_cast<int>(unit), to_mixed);
  MGT_CUDA_CHECK_LAUNCH(qkv_kernel);
}

void launch_qkv(Out mixed, Out q, Out k, Out v, int64_t tokens, int64_t heads, int64_t groups,
                int64_t unit, bool to_mixed, cudaStream_t stream) {
  if (tokens * (heads + 2 * groups) * unit == 0) return;
  // One type throughout, whole 16-byte vectors per head and aligned tensors: raw vectors.
  const bool same_type = mixed.type() == q.type() && q.type() == k.type() && k.type() == v.type();
  const int64_t per_vector = 16 / mixed.element_bytes();
  if (same_type && unit % per_vector == 0 && aligned16(mixed.raw()) && aligned16(q.raw()) &&
      aligned16(k.raw()) && aligned16(v.raw())) {
    launch_qkv_kernel(static_cast<uint4*>(mixed.raw()), static_cast<uint4*>(q.raw()),
                      static_cast<uint4*>(k.raw()), static_cast<uint4*>(v.raw()), tokens, heads,
                      groups, unit / per_vector, to_mixed, stream);
    return;
  }
  launch_qkv_kernel(mixed, q, k, v, tokens, heads, groups, unit, to_mixed, stream);
}

// One thread per (position s, pair i < half) and group of `rows_per_thread` (b, h) rows (from
// blockIdx.y, in steps of gridDim.y); the angle in double as on the CPU, worked out once for its
// rows. A warp's threads hold consecutive pairs of one row: whole sectors per load.
__global__ void rotary_kernel(In x, HeadTensor shape, int64_t rotary_dim,
                              double base, double llama3_factor, int64_t position_offset,
                              const int64_t* offset_on_device, float sign, int64_t rows_per_thread, Out y) {
  if (offset_on_device != nullptr) position_offset += *offset_on_device;
  const int64_t half = rotary_dim / 2;
  const int64_t total = shape.seq * half;
  const int64_t rows = shape.batch * shape.heads;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = idx % half;
    const int64_t s = idx / half;
    const double inv_freq = llama3_scaled_inv_freq(
        pow(base, -static_cast<double>(2 * i) / static_cast<double>(rotary_dim)), llama3_factor);
    const double theta = static_cast<double>(position_offset + s) * inv_freq;
    const auto c = static_cast<float>(cos(theta));
    const auto sn = static_cast<float>(sign * sin(theta));
    for (int64_t first = blockIdx.y * rows_per_thread; first < rows;
         first += static_cast<int64_t>(gridDim.y) * rows_per_thread) {
      const int64_t end = first + rows_per_thread < rows ? first + rows_per_thread : rows;
      for (int64_t r = first; r < end; ++r) {
        const int64_t at = shape.offset(s, r / shape.heads, r % shape.heads);
        const float x1 = x[at + i];
        const float x2 = x[at + i + half];
        y[at + i] = x1 * c - x2 * sn;
        y[at + i + half] = x2 * c + x1 * sn;
      }
    }
  }
}

// The channels past rotary_dim pass through (only when y does not alias x).
__global__ void rotary_pass_kernel(In x, HeadTensor shape, int64_t rotary_dim,
                                   Out y) {
  const int64_t rest_dim = shape.head_dim - rotary_dim;
  const int64_t total = shape.seq * shape.batch * shape.heads * rest_dim;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = rotary_dim + idx % rest_dim;
    int64_t rest = idx / rest_dim;
    const int64_t h = rest % shape.heads;
    rest /= shape.heads;
    const int64_t b = rest % shape.batch;
    const int64_t s = rest / shape.batch;
    const int64_t at = shape.offset(s, b, h) + i;
    y[at] = x[at];
  }
}

}  // namespace

void embedding_forward(const int64_t* ids, int64_t n, In table, int64_t vocab_start,
                       int64_t local_rows, int64_t hidden, Out out, cudaStream_t stream) {
  if (n * hidden == 0) return;
  embedding_forward_kernel<<<grid_for(n * hidden), kThreads, 0, stream>>>(
      ids, n, table, vocab_start, local_rows, hidden, out);
  MGT_CUDA_CHECK_LAUNCH(embedding_forward_kernel);
}

void qkv_split(In mixed, int64_t tokens, int64_t heads, int64_t groups, int64_t unit, Out q, Out k,
               Out v, cudaStream_t stream) {
  launch_qkv(Out(const_cast<void*>(mixed.raw()), mixed.type()), q, k, v, tokens, heads, groups,
             unit, false, stream);
}

void qkv_merge(In q, In k, In v, int64_t tokens, int64_t heads, int64_t groups, int64_t unit,
               Out mixed, cudaStream_t stream) {
  launch_qkv(mixed, Out(const_cast<void*>(q.raw()), q.type()), Out(const_cast<void*>(k.raw()), k.type()),
             Out(const_cast<void*>(v.raw()), v.type()), tokens, heads, groups, unit, true, stream);
}

void rotary(In x, const HeadTensor& shape, const RotaryParams& params,
            float sign, Out y, cudaStream_t stream, const int64_t* offset_on_device) {
  const int64_t pairs = shape.seq * shape.batch * shape.heads * (params.rotary_dim / 2);
  if (pairs > 0) {
    // The angle's double-precision pow, sin and cos cost far more than moving a pair: where the
    // positions alone give thousands of threads (training, prefill), each thread rotates its pair
    // in 16 rows; a decoding step's few positions keep a thread per row.
    const int64_t positions = shape.seq * (params.rotary_dim / 2);
    const int64_t rows_per_thread = positions >= 4096 ? 16 : 1;
    const int64_t row_groups = (shape.batch * shape.heads + rows_per_thread - 1) / rows_per_thread;
    const dim3 grid(grid_for(positions), static_cast<unsigned>(row_groups < 65535 ? row_groups : 65535));
    rotary_kernel<<<grid, kThreads, 0, stream>>>(x, shape, params.rotary_dim, params.base,
                                                 params.llama3_scaling_factor, params.position_offset,
                                                 offset_on_device, sign, rows_per_thread, y);
    MGT_CUDA_CHECK_LAUNCH(rotary_kernel);
  }
  const int64_t rest = shape.seq * shape.batch * shape.heads * (shape.head_dim - params.rotary_dim);
  if (x.raw() != y.raw() && rest > 0) {
    rotary_pass_kernel<<<grid_for(rest), kThreads, 0, stream>>>(x, shape, params.rotary_dim, y);
    MGT_CUDA_CHECK_LAUNCH(rotary_pass_kernel);
  }
}

}  // namespace mgt::cuda
