#include "kernels/cuda/cached_attention.hpp"

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vector8.cuh"

namespace mgt::cuda {
namespace {

constexpr int kWarps = 16;
// Keys a warp loads before it scores them: independent loads in flight hide the memory latency.
constexpr int kUnroll = 4;

struct CacheStep {
  int64_t batch, heads, groups, head_dim, capacity;
  float scale;
};

// Block (i, b, h) = blockIdx.x in q's order: query i of sequence b, head h, at position
// length + i, sees positions 0 … length + i: the cache's below `length`, this step's fresh keys
// and values from there on. The first head of each group also stores the group's fresh key and
// value into the cache. Each warp keeps an online softmax over its keys (lane l holds channels
// l, l + 32, …, kPerLane of them: as few registers as head_dim needs, so that blocks of many warps
// still fit several to an SM); the warps' partial results are merged at the end in a fixed order.
template <int kPerLane>
__global__ void __launch_bounds__(kWarps * 32)
    cached_attention_kernel(In q, In k, In v, In cached_keys, In cached_values, Out key_cache,
                            Out value_cache, const int64_t* length, CacheStep p, Out out) {
  __shared__ float warp_max[kWarps];
  __shared__ float warp_total[kWarps];
  __shared__ float warp_acc[kWarps][kCachedAttentionMaxHeadDim];
  const int64_t row = blockIdx.x;
  const int64_t h = row % p.heads;
  const int64_t b = (row / p.heads) % p.batch;
  const int64_t i = row / (p.heads * p.batch);
  const int64_t per_group = p.heads / p.groups;
  const int64_t g = h / per_group;
  const int64_t past = *length;
  const int64_t keys = min(past + i + 1, p.capacity);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int64_t position_stride = p.batch * p.groups * p.head_dim;
  const int64_t base = (b * p.groups + g) * p.head_dim;

  if (h % per_group == 0 && past + i < p.capacity) {
    for (int64_t d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
      key_cache[(past + i) * position_stride + base + d] = k[i * position_stride + base + d];
      value_cache[(past + i) * position_stride + base + d] = v[i * position_stride + base + d];
    }
  }

  float qv[kPerLane];
  float acc[kPerLane];
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    const int64_t d = lane + 32 * e;
    qv[e] = d < p.head_dim ? q[row * p.head_dim + d] * p.scale : 0.0f;
    acc[e] = 0.0f;
  }
  float m = -INFINITY;
  float total = 0.0f;
  for (int64_t j0 = static_cast<int64_t>(warp) * kUnroll; j0 < keys; j0 += kWarps * kUnroll) {
    float kr[kUnroll][kPerLane];
    float vr[kUnroll][kPerLane];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t j = j0 + u;
      if (j >= keys) break;
      const bool cached = j < past;
      const In key = cached ? cached_keys + (j * position_stride + base) : k + ((j - past) * position_stride + base);
      const In value =
          cached ? cached_values + (j * position_stride + base) : v + ((j - past) * position_stride + base);
#pragma unroll
      for (int e = 0; e < kPerLane; ++e) {
        const int64_t d = lane + 32 * e;
        if (d < p.head_dim) {
          kr[u][e] = key[d];
          vr[u][e] = value[d];
        }
      }
    }
    float s[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float partial = 0.0f;
#pragma unroll
      for (int e = 0; e < kPerLane; ++e)
        if (j0 + u < keys && lane + 32 * e < p.head_dim) partial += qv[e] * kr[u][e];
      s[u] = partial;
    }
    float top = m;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      s[u] = warp_sum(s[u]);
      if (j0 + u < keys) top = fmaxf(top, s[u]);
    }
    const float correction = expf(m - top);  // 0 on the first keys (m = −∞)
    total *= correction;
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) acc[e] *= correction;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (j0 + u >= keys) break;
      const float weight = expf(s[u] - top);
      total += weight;
#pragma unroll
      for (int e = 0; e < kPerLane; ++e)
        if (lane + 32 * e < p.head_dim) acc[e] += weight * vr[u][e];
    }
    m = top;
  }
  if (lane == 0) {
    warp_max[warp] = m;
    warp_total[warp] = total;
  }
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) {
    const int64_t d = lane + 32 * e;
    if (d < p.head_dim) warp_acc[warp][d] = acc[e];
  }
  __syncthreads();
  float top = -INFINITY;
  for (int w = 0; w < kWarps; ++w) top = fmaxf(top, warp_max[w]);
  float sum = 0.0f;
  for (int w = 0; w < kWarps; ++w) sum += warp_total[w] * expf(warp_max[w] - top);
  for (int64_t d = threadIdx.x; d < p.head_dim; d += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (warp_max[w] != -INFINITY) o += warp_acc[w][d] * expf(warp_max[w] - top);
    out[row * p.head_dim + d] = o / sum;
  }
}

// The same attention with each key's row read as 16-byte vectors: head_dim = 8·kLanesPerKey, so a
// group of kLanesPerKey lanes holds one key (eight channels a lane) and a warp scores
// 32 / kLanesPerKey keys per load, summing each score over its group in log2(kLanesPerKey)
// shuffles. Each group keeps its own online softmax; the groups of a warp, then the warps, are
// merged in a fixed order. Launched early: the cached keys and values of earlier steps (written
// before this step's kernels began) are loaded while the kernel that writes q, k and v still runs.
template <int kLanesPerKey>
__global__ void __launch_bounds__(kWarps * 32)
    cached_attention_vector_kernel(In q, In k, In v, In cached_keys, In cached_values, Out key_cache,
                                   Out value_cache, const int64_t* length, CacheStep p, Out out) {
  constexpr int kKeysPerWarp = 32 / kLanesPerKey;
  constexpr int kHeadDim = 8 * kLanesPerKey;
  constexpr int kVectorUnroll = 2;
  __shared__ float warp_max[kWarps];
  __shared__ float warp_total[kWarps];
  __shared__ float warp_acc[kWarps][kHeadDim];
  let_next_kernel_start();
  const int64_t row = blockIdx.x;
  const int64_t h = row % p.heads;
  const int64_t b = (row / p.heads) % p.batch;
  const int64_t i = row / (p.heads * p.batch);
  const int64_t per_group = p.heads / p.groups;
  const int64_t g = h / per_group;
  const int64_t past = *length;  // copied from the host before the step's kernels
  const int64_t keys = min(past + i + 1, p.capacity);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int slot = lane % kLanesPerKey;         // this lane's eight channels: 8·slot …
  const int64_t key_in_warp = lane / kLanesPerKey;
  const int64_t position_stride = p.batch * p.groups * kHeadDim;
  const int64_t base = (b * p.groups + g) * kHeadDim;
  // The loops run over the warp's first key (the same in every lane, as the shuffles need).
  const int64_t first = static_cast<int64_t>(warp) * kKeysPerWarp;
  const int64_t step = static_cast<int64_t>(kWarps) * kKeysPerWarp;

  float kr[kVectorUnroll][8], vr[kVectorUnroll][8];
  // fresh: this step's keys (j ≥ past) too, which the previous kernel writes.
  const auto load = [&](int64_t j0, bool fresh) {
#pragma unroll
    for (int u = 0; u < kVectorUnroll; ++u) {
      const int64_t j = j0 + key_in_warp + u * step;
      if (j >= keys) break;
      if (j < past) {
        load8(cached_keys + (j * position_stride + base), slot, kr[u]);
        load8(cached_values + (j * position_stride + base), slot, vr[u]);
      } else if (fresh) {
        load8(k + ((j - past) * position_stride + base), slot, kr[u]);
        load8(v + ((j - past) * position_stride + base), slot, vr[u]);
      }
    }
  };
  load(first, false);
  wait_for_previous_kernels();
#pragma unroll
  for (int u = 0; u < kVectorUnroll; ++u) {
    const int64_t j = first + key_in_warp + u * step;
    if (j >= past && j < keys) {
      load8(k + ((j - past) * position_stride + base), slot, kr[u]);
      load8(v + ((j - past) * position_stride + base), slot, vr[u]);
    }
  }
  if (h % per_group == 0 && past + i < p.capacity) {
    for (int64_t d = threadIdx.x; d < kHeadDim; d += blockDim.x) {
      key_cache[(past + i) * position_stride + base + d] = k[i * position_stride + base + d];
      value_cache[(past + i) * position_stride + base + d] = v[i * position_stride + base + d];
    }
  }
  float qv[8];
  load8(q + row * kHeadDim, slot, qv);
#pragma unroll
  for (int e = 0; e < 8; ++e) qv[e] *= p.scale;
  float acc[8] = {};
  float m = -INFINITY;
  float total = 0.0f;
  for (int64_t j0 = first; j0 < keys; j0 += step * kVectorUnroll) {
    if (j0 != first) load(j0, true);
    float s[kVectorUnroll];
#pragma unroll
    for (int u = 0; u < kVectorUnroll; ++u) {
      float partial = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e) partial += qv[e] * kr[u][e];
#pragma unroll
      for (int offset = kLanesPerKey / 2; offset > 0; offset >>= 1)
        partial += __shfl_xor_sync(0xffffffffu, partial, offset);
      s[u] = j0 + key_in_warp + u * step < keys ? partial : -INFINITY;
    }
    float top = m;
#pragma unroll
    for (int u = 0; u < kVectorUnroll; ++u) top = fmaxf(top, s[u]);
    if (top == -INFINITY) continue;  // no key of this group here (the shuffles above are done)
    const float correction = expf(m - top);  // 0 on the first keys (m = −∞)
    total *= correction;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] *= correction;
#pragma unroll
    for (int u = 0; u < kVectorUnroll; ++u) {
      if (s[u] == -INFINITY) continue;
      const float weight = expf(s[u] - top);
      total += weight;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] += weight * vr[u][e];
    }
    m = top;
  }
  // The warp's key groups, merged pairwise by lane distance (the same order on every run).
#pragma unroll
  for (int offset = kLanesPerKey; offset < 32; offset <<= 1) {
    const float other_m = __shfl_xor_sync(0xffffffffu, m, offset);
    const float other_total = __shfl_xor_sync(0xffffffffu, total, offset);
    const float top = fmaxf(m, other_m);
    const float mine = m == -INFINITY ? 0.0f : expf(m - top);
    const float theirs = other_m == -INFINITY ? 0.0f : expf(other_m - top);
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[e] = acc[e] * mine + __shfl_xor_sync(0xffffffffu, acc[e], offset) * theirs;
    total = total * mine + other_total * theirs;
    m = top;
  }
  if (lane == 0) {
    warp_max[warp] = m;
    warp_total[warp] = total;
  }
  if (lane < kLanesPerKey)
#pragma unroll
    for (int e = 0; e < 8; ++e) warp_acc[warp][8 * slot + e] = acc[e];
  __syncthreads();
  float top = -INFINITY;
  for (int w = 0; w < kWarps; ++w) top = fmaxf(top, warp_max[w]);
  float sum = 0.0f;
  for (int w = 0; w < kWarps; ++w)
    if (warp_max[w] != -INFINITY) sum += warp_total[w] * expf(warp_max[w] - top);
  for (int64_t d = threadIdx.x; d < kHeadDim; d += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (warp_max[w] != -INFINITY) o += warp_acc[w][d] * expf(warp_max[w] - top);
    out[row * kHeadDim + d] = o / sum;
  }
}

}  // namespace

void cached_attention(In q, In k, In v, FloatView key_cache, FloatView value_cache, const int64_t* length,
                      const AttentionShape& shape, float softmax_scale, Out out, cudaStream_t stream) {
  const int64_t rows = shape.seq_q * shape.batch * shape.heads;
  if (rows == 0 || shape.head_dim == 0) return;
  const CacheStep step{shape.batch, shape.heads, shape.groups, shape.head_dim, shape.seq_kv, softmax_scale};
  const auto launch = [&](auto kernel) {
    kernel<<<static_cast<unsigned>(rows), kWarps * 32, 0, stream>>>(q, k, v, In(key_cache), In(value_cache),
                                                                      Out(key_cache), Out(value_cache), length, step, out);
    MGT_CUDA_CHECK_LAUNCH(cached_attention_kernel);
  };
  const auto launch_vector = [&](auto kernel) {
    launch_early(kernel, static_cast<unsigned>(rows), kWarps * 32, stream, q, k, v, In(key_cache), In(value_cache),
                 Out(key_cache), Out(value_cache), length, step, out);
  };
  // Rows of 8·2^n channels, 16-byte aligned, take the vector kernel.
  if (vectorizable(shape.head_dim, {q.raw(), k.raw(), v.raw(), key_cache.raw(), value_cache.raw(), out.raw()})) {
    switch (shape.head_dim) {
      case 8: launch_vector(cached_attention_vector_kernel<1>); return;
      case 16: launch_vector(cached_attention_vector_kernel<2>); return;
      case 32: launch_vector(cached_attention_vector_kernel<4>); return;
      case 64: launch_vector(cached_attention_vector_kernel<8>); return;
      case 128: launch_vector(cached_attention_vector_kernel<16>); return;
      case 256: launch_vector(cached_attention_vector_kernel<32>); return;
      default: break;
    }
  }
  if (shape.head_dim <= 64) launch(cached_attention_kernel<2>);
  else if (shape.head_dim <= 128) launch(cached_attention_kernel<4>);
  else launch(cached_attention_kernel<8>);
}

}  // namespace mgt::cuda
