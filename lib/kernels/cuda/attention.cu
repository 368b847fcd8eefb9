// Flash attention in fp32: the semantics of kernels/cpu/attention.cpp computed tile by tile, so
// no seq_q × seq_kv matrix ever exists.
//
// Every kernel works on square tiles of T queries × T keys with 256 threads seen as 16 row groups
// × 16 column lanes; a row group is half a warp, so a reduction along a row is four shuffles. The
// head dimension is padded with zeros in shared memory to DP ∈ {64, 128, 256}, the only three
// instantiations. Register tiles: a thread holds T/16 rows × T/16 score columns (columns
// cl + 16m) and T/16 rows × DP/16 output columns (float4 chunks at 4·cl + 64m), which keeps the
// float4 shared-memory reads free of bank conflicts.
//
//  - forward: one block per (batch, head, query tile); loops over the key tiles the causal mask
//    leaves visible with an online softmax, O and the row sums in registers.
//  - backward dk/dv: one block per (batch, group, key tile) with its K and V tiles resident; loops
//    over the group's heads and the query tiles that see the key tile, accumulating dk and dv in
//    registers (no atomics, so the sum over heads is in a fixed order).
//  - backward dq: one block per (batch, head, query tile), looping over key tiles. It recomputes
//    S and dP, the price of determinism without atomics.
//  - delta: D_i = dout_i · out_i, one warp per row, into a stream-ordered scratch buffer.
// Dropout masks are drawn per tile into shared memory, with the CPU's Philox element numbering.
#include "kernels/cuda/attention.hpp"

#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "kernels/philox.hpp"
#include "kernels/cuda/launch.cuh"

namespace mgt::cuda {
namespace {

constexpr int kAttentionThreads = 256;
constexpr int kMaxHeadDim = 256;

// Tile geometry for head dimensions padded to DP.
template <int DP>
struct Geometry {
  static constexpr int T = DP > 128 ? 32 : 64;  // queries and keys per tile
  static constexpr int LD = DP + 4;  // row stride of [T][DP] tiles: float4-aligned, conflict-free
  static constexpr int LDT = T + 4;  // row stride of [T][T] tiles
  static constexpr int RT = T / 16;  // tile rows per thread
  static constexpr int CT = T / 16;  // score columns per thread
  static constexpr int OC = DP / 64;  // float4 chunks of output columns per thread
};

// A thread's share of a [T][T] score tile and of a [T][DP] output tile.
template <int DP>
using ScoreTile = float[Geometry<DP>::RT][Geometry<DP>::CT];
template <int DP>
using OutputTile = float[Geometry<DP>::RT][4 * Geometry<DP>::OC];

// Everything the kernels need, by value. Offsets follow HeadTensor: element (s, b, h, d)
// lives at s·seq_stride + b·batch_stride + h·head_dim + d.
struct Args {
  const float* q;
  const float* k;
  const float* v;
  const float* out;
  const float* dout;
  const float* lse;
  const float* delta;
  float* o;
  float* lse_out;
  float* dq;
  float* dk;
  float* dv;
  int64_t seq_q, seq_kv, heads, groups;
  // Query row r sees keys j <= r + shift: seq_kv − seq_q under the causal mask, seq_kv (all of
  // them) without it.
  int64_t shift;
  int64_t q_seq_stride, q_batch_stride, kv_seq_stride, kv_batch_stride;
  int head_dim;
  float scale;
  bool dropout;
  uint32_t keep_threshold;  // keep iff (word >> 8) >= threshold, as in cpu/dropout.cpp
  float keep_scale;
  uint64_t seed, stream, offset;
  // The whole attention's heads and this call's first one, for the dropout index (see
  // cpu/attention.hpp).
  int64_t dropout_heads, dropout_first_head;
};

// The (batch, head) pair's number in the unsharded attention, as the dropout index counts it.
__device__ __forceinline__ int64_t dropout_pair(const Args& a, int64_t pair) {
  return pair / a.heads * a.dropout_heads + a.dropout_first_head + pair % a.heads;
}

__device__ __forceinline__ float component(const float4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ __forceinline__ float half_warp_max(float v) {
  for (int off = 8; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

__device__ __forceinline__ float half_warp_sum(float v) {
  for (int off = 8; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// tile[T][LD] = rows [0, rows) of a strided [seq, head_dim] matrix, zero-padded.
template <int DP>
__device__ void load_rows(float* tile, const float* src, int64_t stride, int64_t rows,
                          int head_dim) {
  using G = Geometry<DP>;
  for (int e = threadIdx.x; e < G::T * DP; e += kAttentionThreads) {
    const int r = e / DP;
    const int d = e % DP;
    tile[r * G::LD + d] = (r < rows && d < head_dim) ? src[r * stride + d] : 0.0f;
  }
}

// keep[T][T] for the tile whose element (0, 0) has global dropout index `first`; rows of the
// probability tensor are seq_kv apart. Each thread draws one contiguous run of a row.
template <int T>
__device__ void draw_keep(uint8_t* keep, const Args& a, uint64_t first) {
  constexpr int kRun = T * T / kAttentionThreads;
  const int r = threadIdx.x * kRun / T;
  const int c0 = threadIdx.x * kRun % T;
  uint64_t index = first + static_cast<uint64_t>(r) * static_cast<uint64_t>(a.seq_kv) + c0;
  const PhiloxKey key = {static_cast<uint32_t>(a.seed), static_cast<uint32_t>(a.seed >> 32)};
  int e = 0;
  while (e < kRun) {
    const uint64_t block = index / 4;
    const PhiloxCounter words = philox4x32_10(
        {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
         static_cast<uint32_t>(a.stream), static_cast<uint32_t>(a.stream >> 32)},
        key);
    for (int lane = static_cast<int>(index % 4); lane < 4 && e < kRun; ++lane, ++e, ++index) {
      const uint32_t word = lane == 0   ? words[0]
                            : lane == 1 ? words[1]
                            : lane == 2 ? words[2]
                                        : words[3];
      keep[r * T + c0 + e] = (word >> 8) >= a.keep_threshold ? 1 : 0;
    }
  }
}

// acc[i][m] = Σ_d a[row i][d] · b[col m][d] for the thread's rows and score columns.
template <int DP>
__device__ __forceinline__ void tile_scores(const float* a, const float* b, ScoreTile<DP>& acc) {
  using G = Geometry<DP>;
  const int rg = threadIdx.x / 16;
  const int cl = threadIdx.x % 16;
#pragma unroll
  for (int i = 0; i < G::RT; ++i) {
#pragma unroll
    for (int m = 0; m < G::CT; ++m) acc[i][m] = 0.0f;
  }
#pragma unroll 4
  for (int d = 0; d < DP; d += 4) {
    float4 av[G::RT];
    float4 bv[G::CT];
#pragma unroll
    for (int i = 0; i < G::RT; ++i) {
      av[i] = *reinterpret_cast<const float4*>(a + (rg * G::RT + i) * G::LD + d);
    }
#pragma unroll
    for (int m = 0; m < G::CT; ++m) {
      bv[m] = *reinterpret_cast<const float4*>(b + (cl + 16 * m) * G::LD + d);
    }
#pragma unroll
    for (int i = 0; i < G::RT; ++i) {
#pragma unroll
      for (int m = 0; m < G::CT; ++m) {
        acc[i][m] = fmaf(av[i].x, bv[m].x, acc[i][m]);
        acc[i][m] = fmaf(av[i].y, bv[m].y, acc[i][m]);
        acc[i][m] = fmaf(av[i].z, bv[m].z, acc[i][m]);
        acc[i][m] = fmaf(av[i].w, bv[m].w, acc[i][m]);
      }
    }
  }
}

// acc[i][c] += Σ_k a[row i][k] · b[k][c], a a [T][LDT] tile, b a [T][LD] tile.
template <int DP>
__device__ __forceinline__ void tile_accumulate(const float* a, const float* b,
                                                OutputTile<DP>& acc) {
  using G = Geometry<DP>;
  const int rg = threadIdx.x / 16;
  const int cl = threadIdx.x % 16;
#pragma unroll 2
  for (int k = 0; k < G::T; k += 4) {
    float4 av[G::RT];
#pragma unroll
    for (int i = 0; i < G::RT; ++i) {
      av[i] = *reinterpret_cast<const float4*>(a + (rg * G::RT + i) * G::LDT + k);
    }
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      float4 bv[G::OC];
#pragma unroll
      for (int m = 0; m < G::OC; ++m) {
        bv[m] = *reinterpret_cast<const float4*>(b + (k + kk) * G::LD + 4 * cl + 64 * m);
      }
#pragma unroll
      for (int i = 0; i < G::RT; ++i) {
        const float s = component(av[i], kk);
#pragma unroll
        for (int m = 0; m < G::OC; ++m) {
          acc[i][4 * m + 0] = fmaf(s, bv[m].x, acc[i][4 * m + 0]);
          acc[i][4 * m + 1] = fmaf(s, bv[m].y, acc[i][4 * m + 1]);
          acc[i][4 * m + 2] = fmaf(s, bv[m].z, acc[i][4 * m + 2]);
          acc[i][4 * m + 3] = fmaf(s, bv[m].w, acc[i][4 * m + 3]);
        }
      }
    }
  }
}

// Writes the thread's rows of a register tile (scaled) to a strided [seq, head_dim] matrix.
template <int DP>
__device__ void store_rows(float* dst, int64_t stride, int64_t first_row, int64_t seq,
                           int head_dim, const OutputTile<DP>& acc, float scale) {
  using G = Geometry<DP>;
  const int rg = threadIdx.x / 16;
  const int cl = threadIdx.x % 16;
#pragma unroll
  for (int i = 0; i < G::RT; ++i) {
    const int64_t row = first_row + rg * G::RT + i;
    if (row >= seq) continue;
#pragma unroll
    for (int c = 0; c < 4 * G::OC; ++c) {
      const int d = 4 * cl + 64 * (c / 4) + c % 4;
      if (d < head_dim) dst[row * stride + d] = acc[i][c] * scale;
    }
  }
}

template <int DP>
constexpr size_t forward_smem() {
  using G = Geometry<DP>;
  return (2 * G::T * G::LD + G::T * G::LDT) * sizeof(float) + G::T * G::T;
}

template <int DP>
__global__ void __launch_bounds__(kAttentionThreads) attention_forward_kernel(Args a) {
  using G = Geometry<DP>;
  constexpr int T = G::T;
  extern __shared__ float4 smem4[];
  float* sq = reinterpret_cast<float*>(smem4);
  float* skv = sq + T * G::LD;  // K, then V, of the current key tile
  float* sp = skv + T * G::LD;
  auto* keep = reinterpret_cast<uint8_t*>(sp + T * G::LDT);

  const int64_t pair = blockIdx.x;  // b·heads + h
  const int64_t b = pair / a.heads;
  const int64_t h = pair % a.heads;
  const int64_t g = h / (a.heads / a.groups);
  const int64_t q0 = static_cast<int64_t>(blockIdx.y) * T;
  const int64_t shift = a.shift;
  const int rg = threadIdx.x / 16;
  const int cl = threadIdx.x % 16;
  const int64_t kv_at = b * a.kv_batch_stride + g * a.head_dim;

  load_rows<DP>(sq, a.q + b * a.q_batch_stride + h * a.head_dim + q0 * a.q_seq_stride,
                a.q_seq_stride, a.seq_q - q0, a.head_dim);
  OutputTile<DP> o = {};
  float row_max[G::RT];
  float row_sum[G::RT];  // this thread's columns only; summed over the row group at the end
#pragma unroll
  for (int i = 0; i < G::RT; ++i) {
    row_max[i] = -INFINITY;
    row_sum[i] = 0.0f;
  }
  const uint64_t drop_first =
      static_cast<uint64_t>((dropout_pair(a, pair) * a.seq_q + q0) * a.seq_kv) + a.offset;
  const int64_t kv_end = min(a.seq_kv, q0 + T + shift);
  // Key 0 is visible to every row, so after the first tile each row_max is finite.
  for (int64_t k0 = 0; k0 < kv_end; k0 += T) {
    load_rows<DP>(skv, a.k + kv_at + k0 * a.kv_seq_stride, a.kv_seq_stride, a.seq_kv - k0,
                  a.head_dim);
    if (a.dropout) draw_keep<T>(keep, a, drop_first + static_cast<uint64_t>(k0));
    __syncthreads();
    ScoreTile<DP> s;
    tile_scores<DP>(sq, skv, s);
#pragma unroll
    for (int i = 0; i < G::RT; ++i) {
      const int r = rg * G::RT + i;
      const int64_t last = q0 + r + shift;
      float tile_max = -INFINITY;
#pragma unroll
      for (int m = 0; m < G::CT; ++m) {
        const int64_t j = k0 + cl + 16 * m;
        s[i][m] = (j <= last && j < a.seq_kv) ? s[i][m] * a.scale : -INFINITY;
        tile_max = fmaxf(tile_max, s[i][m]);
      }
      const float new_max = fmaxf(row_max[i], half_warp_max(tile_max));
      const float rescale = expf(row_max[i] - new_max);
      row_max[i] = new_max;
      row_sum[i] *= rescale;
#pragma unroll
      for (int c = 0; c < 4 * G::OC; ++c) o[i][c] *= rescale;
#pragma unroll
      for (int m = 0; m < G::CT; ++m) {
        const int c = cl + 16 * m;
        float p = expf(s[i][m] - new_max);
        row_sum[i] += p;  // the normaliser is of the softmax before dropout
        if (a.dropout && !keep[r * T + c]) p = 0.0f;
        sp[r * G::LDT + c] = p;
      }
    }
    __syncthreads();
    load_rows<DP>(skv, a.v + kv_at + k0 * a.kv_seq_stride, a.kv_seq_stride, a.seq_kv - k0,
                  a.head_dim);
    __syncthreads();
    tile_accumulate<DP>(sp, skv, o);
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < G::RT; ++i) {
    const float total = half_warp_sum(row_sum[i]);
    const float inv = a.keep_scale / total;
#pragma unroll
    for (int c = 0; c < 4 * G::OC; ++c) o[i][c] *= inv;
    const int64_t row = q0 + rg * G::RT + i;
    if (cl == 0 && row < a.seq_q) a.lse_out[pair * a.seq_q + row] = row_max[i] + logf(total);
  }
  store_rows<DP>(a.o + b * a.q_batch_stride + h * a.head_dim, a.q_seq_stride, q0, a.seq_q,
                 a.head_dim, o, 1.0f);
}

// The probability and score gradient of one (query, key) element, as the CPU backward defines
// them: returns dS = P·(dP·f − D) and sets p_drop = P·f, f the dropout factor.
__device__ __forceinline__ float score_gradient(const Args& a, bool visible, float score,
                                                float dp, float lse, float delta, bool kept,
                                                float& p_drop) {
  const float p = visible ? expf(score * a.scale - lse) : 0.0f;
  const float factor = a.dropout ? (kept ? a.keep_scale : 0.0f) : 1.0f;
  p_drop = p * factor;
  return p * (dp * factor - delta);
}

template <int DP>
constexpr size_t backward_kv_smem() {
  using G = Geometry<DP>;
  return (4 * G::T * G::LD + 2 * G::T * G::LDT + 2 * G::T) * sizeof(float) + G::T * G::T;
}

template <int DP>
__global__ void __launch_bounds__(kAttentionThreads) attention_backward_kv_kernel(Args a) {
  using G = Geometry<DP>;
  constexpr int T = G::T;
  extern __shared__ float4 smem4[];
  float* sk = reinterpret_cast<float*>(smem4);
  float* sv = sk + T * G::LD;
  float* sq = sv + T * G::LD;
  float* sdo = sq + T * G::LD;
  float* spt = sdo + T * G::LD;  // dropped-out probabilities, transposed: [key][query]
  float* sdst = spt + T * G::LDT;  // score gradients, transposed
  float* slse = sdst + T * G::LDT;
  float* sdelta = slse + T;
  auto* keep = reinterpret_cast<uint8_t*>(sdelta + T);

  const int64_t b = blockIdx.x / a.groups;
  const int64_t g = blockIdx.x % a.groups;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * T;
  const int64_t shift = a.shift;
  const int64_t per_group = a.heads / a.groups;
  const int rg = threadIdx.x / 16;
  const int cl = threadIdx.x % 16;
  const int64_t kv_at = b * a.kv_batch_stride + g * a.head_dim + k0 * a.kv_seq_stride;

  load_rows<DP>(sk, a.k + kv_at, a.kv_seq_stride, a.seq_kv - k0, a.head_dim);
  load_rows<DP>(sv, a.v + kv_at, a.kv_seq_stride, a.seq_kv - k0, a.head_dim);
  OutputTile<DP> dk = {};
  OutputTile<DP> dv = {};
  // The first query that sees key k0 is k0 − shift; earlier query tiles contribute nothing.
  const int64_t q_first = max(static_cast<int64_t>(0), k0 - shift) / T * T;
  for (int64_t h = g * per_group; h < (g + 1) * per_group; ++h) {
    const int64_t pair = b * a.heads + h;
    const int64_t q_at = b * a.q_batch_stride + h * a.head_dim;
    for (int64_t q0 = q_first; q0 < a.seq_q; q0 += T) {
      load_rows<DP>(sq, a.q + q_at + q0 * a.q_seq_stride, a.q_seq_stride, a.seq_q - q0,
                    a.head_dim);
      load_rows<DP>(sdo, a.dout + q_at + q0 * a.q_seq_stride, a.q_seq_stride, a.seq_q - q0,
                    a.head_dim);
      if (threadIdx.x < T) {
        const int64_t row = q0 + threadIdx.x;
        slse[threadIdx.x] = row < a.seq_q ? a.lse[pair * a.seq_q + row] : 0.0f;
        sdelta[threadIdx.x] = row < a.seq_q ? a.delta[pair * a.seq_q + row] : 0.0f;
      }
      if (a.dropout) {
        const auto first =
            static_cast<uint64_t>((dropout_pair(a, pair) * a.seq_q + q0) * a.seq_kv + k0);
        draw_keep<T>(keep, a, first + a.offset);
      }
      __syncthreads();
      ScoreTile<DP> s;
      ScoreTile<DP> dp;
      tile_scores<DP>(sq, sk, s);
      tile_scores<DP>(sdo, sv, dp);
#pragma unroll
      for (int i = 0; i < G::RT; ++i) {
        const int r = rg * G::RT + i;
        const int64_t row = q0 + r;
#pragma unroll
        for (int m = 0; m < G::CT; ++m) {
          const int c = cl + 16 * m;
          const int64_t col = k0 + c;
          const bool visible = row < a.seq_q && col < a.seq_kv && col <= row + shift;
          float p_drop;
          const float ds = score_gradient(a, visible, s[i][m], dp[i][m], slse[r], sdelta[r],
                                          a.dropout && keep[r * T + c] != 0, p_drop);
          spt[c * G::LDT + r] = p_drop;
          sdst[c * G::LDT + r] = ds;
        }
      }
      __syncthreads();
      tile_accumulate<DP>(spt, sdo, dv);  // dV += P_dropᵀ·dO
      tile_accumulate<DP>(sdst, sq, dk);  // dK += dSᵀ·Q (scaled at the end)
      __syncthreads();
    }
  }
  const int64_t out_at = b * a.kv_batch_stride + g * a.head_dim;
  store_rows<DP>(a.dk + out_at, a.kv_seq_stride, k0, a.seq_kv, a.head_dim, dk, a.scale);
  store_rows<DP>(a.dv + out_at, a.kv_seq_stride, k0, a.seq_kv, a.head_dim, dv, 1.0f);
}

template <int DP>
constexpr size_t backward_q_smem() {
  using G = Geometry<DP>;
  return (4 * G::T * G::LD + G::T * G::LDT) * sizeof(float) + G::T * G::T;
}

template <int DP>
__global__ void __launch_bounds__(kAttentionThreads) attention_backward_q_kernel(Args a) {
  using G = Geometry<DP>;
  constexpr int T = G::T;
  extern __shared__ float4 smem4[];
  float* sq = reinterpret_cast<float*>(smem4);
  float* sdo = sq + T * G::LD;
  float* sk = sdo + T * G::LD;
  float* sv = sk + T * G::LD;
  float* sds = sv + T * G::LD;
  auto* keep = reinterpret_cast<uint8_t*>(sds + T * G::LDT);

  const int64_t pair = blockIdx.x;  // b·heads + h
  const int64_t b = pair / a.heads;
  const int64_t h = pair % a.heads;
  const int64_t g = h / (a.heads / a.groups);
  const int64_t q0 = static_cast<int64_t>(blockIdx.y) * T;
  const int64_t shift = a.shift;
  const int rg = threadIdx.x / 16;
  const int cl = threadIdx.x % 16;
  const int64_t q_at = b * a.q_batch_stride + h * a.head_dim + q0 * a.q_seq_stride;
  const int64_t kv_at = b * a.kv_batch_stride + g * a.head_dim;

  load_rows<DP>(sq, a.q + q_at, a.q_seq_stride, a.seq_q - q0, a.head_dim);
  load_rows<DP>(sdo, a.dout + q_at, a.q_seq_stride, a.seq_q - q0, a.head_dim);
  float lse[G::RT];
  float delta[G::RT];
#pragma unroll
  for (int i = 0; i < G::RT; ++i) {
    const int64_t row = q0 + rg * G::RT + i;
    lse[i] = row < a.seq_q ? a.lse[pair * a.seq_q + row] : 0.0f;
    delta[i] = row < a.seq_q ? a.delta[pair * a.seq_q + row] : 0.0f;
  }
  OutputTile<DP> dq = {};
  const uint64_t drop_first =
      static_cast<uint64_t>((dropout_pair(a, pair) * a.seq_q + q0) * a.seq_kv) + a.offset;
  const int64_t kv_end = min(a.seq_kv, q0 + T + shift);
  for (int64_t k0 = 0; k0 < kv_end; k0 += T) {
    load_rows<DP>(sk, a.k + kv_at + k0 * a.kv_seq_stride, a.kv_seq_stride, a.seq_kv - k0,
                  a.head_dim);
    load_rows<DP>(sv, a.v + kv_at + k0 * a.kv_seq_stride, a.kv_seq_stride, a.seq_kv - k0,
                  a.head_dim);
    if (a.dropout) draw_keep<T>(keep, a, drop_first + static_cast<uint64_t>(k0));
    __syncthreads();
    ScoreTile<DP> s;
    ScoreTile<DP> dp;
    tile_scores<DP>(sq, sk, s);
    tile_scores<DP>(sdo, sv, dp);
#pragma unroll
    for (int i = 0; i < G::RT; ++i) {
      const int r = rg * G::RT + i;
      const int64_t row = q0 + r;
#pragma unroll
      for (int m = 0; m < G::CT; ++m) {
        const int c = cl + 16 * m;
        const int64_t col = k0 + c;
        const bool visible = row < a.seq_q && col < a.seq_kv && col <= row + shift;
        float p_drop;
        sds[r * G::LDT + c] = score_gradient(a, visible, s[i][m], dp[i][m], lse[i], delta[i],
                                             a.dropout && keep[r * T + c] != 0, p_drop);
      }
    }
    __syncthreads();
    tile_accumulate<DP>(sds, sk, dq);  // dQ += dS·K (scaled at the end)
    __syncthreads();
  }
  store_rows<DP>(a.dq + b * a.q_batch_stride + h * a.head_dim, a.q_seq_stride, q0, a.seq_q,
                 a.head_dim, dq, a.scale);
}

// delta[b·heads + h, i] = dout_i · out_i, one warp per row.
__global__ void attention_delta_kernel(Args a, int64_t rows, float* delta) {
  constexpr int kWarps = kAttentionThreads / 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (row >= rows) return;
  const int64_t i = row % a.seq_q;
  const int64_t pair = row / a.seq_q;
  const int64_t at =
      (pair / a.heads) * a.q_batch_stride + (pair % a.heads) * a.head_dim + i * a.q_seq_stride;
  float sum = 0.0f;
  for (int d = threadIdx.x % 32; d < a.head_dim; d += 32) sum += a.out[at + d] * a.dout[at + d];
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) delta[row] = sum;
}

void check(const AttentionShape& s, const AttentionParams& p, const char* name) {
  const auto require = [name](bool ok, const char* what) {
    if (!ok) throw Error(std::string(name) + ": " + what);
  };
  require(s.batch >= 0 && s.seq_q >= 0 && s.heads >= 0, "sizes must be >= 0");
  require(s.head_dim > 0 && s.head_dim <= kMaxHeadDim, "head_dim must be in [1, 256]");
  require(!p.causal || s.seq_kv >= s.seq_q, "seq_kv must be >= seq_q under the causal mask");
  require(s.groups > 0 && s.heads % s.groups == 0, "groups must divide heads");
  require(p.dropout_p >= 0.0f && p.dropout_p < 1.0f, "dropout_p must be in [0, 1)");
  require(p.dropout_first_head >= 0 &&
              p.dropout_first_head + s.heads <= (p.dropout_heads > 0 ? p.dropout_heads : s.heads),
          "dropout heads [first, first + heads) must lie within dropout_heads");
  require(std::isfinite(p.softmax_scale) && p.softmax_scale > 0.0f, "softmax_scale must be > 0");
  const int64_t tiles = (s.seq_kv + 31) / 32;
  require(tiles <= 65535 && s.batch * s.heads <= INT32_MAX, "sequence or batch too long");
}

Args make_args(const AttentionShape& s, const AttentionParams& p) {
  const HeadTensor qt = s.query();
  const HeadTensor kvt = s.key_value();
  Args a{};
  a.seq_q = s.seq_q;
  a.seq_kv = s.seq_kv;
  a.shift = p.causal ? s.seq_kv - s.seq_q : s.seq_kv;
  a.heads = s.heads;
  a.groups = s.groups;
  a.q_seq_stride = qt.seq_stride();
  a.q_batch_stride = qt.offset(0, 1, 0);
  a.kv_seq_stride = kvt.seq_stride();
  a.kv_batch_stride = kvt.offset(0, 1, 0);
  a.head_dim = static_cast<int>(s.head_dim);
  a.scale = p.softmax_scale;
  a.dropout = p.dropout_p > 0.0f;
  a.keep_threshold =
      static_cast<uint32_t>(std::ceil(static_cast<double>(p.dropout_p) * 16777216.0));
  a.keep_scale = 1.0f / (1.0f - p.dropout_p);
  a.seed = p.dropout_key.seed;
  a.stream = p.dropout_key.stream;
  a.offset = p.dropout_key.offset;
  a.dropout_heads = p.dropout_heads > 0 ? p.dropout_heads : s.heads;
  a.dropout_first_head = p.dropout_first_head;
  return a;
}

template <typename Kernel>
void launch(Kernel kernel, unsigned pairs, int64_t seq, int tile, size_t smem, cudaStream_t stream,
            const Args& a) {
  MGT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
  const dim3 grid(pairs, static_cast<unsigned>((seq + tile - 1) / tile));
  kernel<<<grid, kAttentionThreads, smem, stream>>>(a);
  MGT_CUDA_CHECK_LAUNCH(attention);
}

template <int DP>
void forward(const Args& a, int64_t batch, cudaStream_t stream) {
  launch(attention_forward_kernel<DP>, static_cast<unsigned>(batch * a.heads), a.seq_q,
         Geometry<DP>::T, forward_smem<DP>(), stream, a);
}

template <int DP>
void backward(const Args& a, int64_t batch, cudaStream_t stream) {
  launch(attention_backward_kv_kernel<DP>, static_cast<unsigned>(batch * a.groups), a.seq_kv,
         Geometry<DP>::T, backward_kv_smem<DP>(), stream, a);
  if (a.seq_q > 0 && a.heads > 0) {
    launch(attention_backward_q_kernel<DP>, static_cast<unsigned>(batch * a.heads), a.seq_q,
           Geometry<DP>::T, backward_q_smem<DP>(), stream, a);
  }
}

// The scratch buffer for D, released in stream order whatever happens to the launches.
class StreamScratch {
 public:
  StreamScratch(size_t floats, cudaStream_t stream) : stream_(stream) {
    if (floats > 0) {
      MGT_CUDA_CHECK(
          cudaMallocAsync(reinterpret_cast<void**>(&ptr_), floats * sizeof(float), stream));
    }
  }
  ~StreamScratch() {
    if (ptr_ != nullptr) cudaFreeAsync(ptr_, stream_);
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  float* get() const { return ptr_; }

 private:
  float* ptr_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace

void attention_forward(const float* q, const float* k, const float* v,
                       const AttentionShape& shape, const AttentionParams& params,
                       float* out, float* lse, cudaStream_t stream) {
  check(shape, params, "cuda::attention_forward");
  if (shape.batch == 0 || shape.heads == 0 || shape.seq_q == 0) return;
  Args a = make_args(shape, params);
  a.q = q;
  a.k = k;
  a.v = v;
  a.o = out;
  a.lse_out = lse;
  if (shape.head_dim <= 64) {
    forward<64>(a, shape.batch, stream);
  } else if (shape.head_dim <= 128) {
    forward<128>(a, shape.batch, stream);
  } else {
    forward<256>(a, shape.batch, stream);
  }
}

void attention_backward(const float* q, const float* k, const float* v, const float* out,
                        const float* dout, const float* lse, const AttentionShape& shape,
                        const AttentionParams& params, float* dq, float* dk, float* dv,
                        cudaStream_t stream) {
  check(shape, params, "cuda::attention_backward");
  // dk and dv are overwritten even when no query sees them, as on the CPU.
  if (shape.batch == 0 || shape.seq_kv == 0) return;
  Args a = make_args(shape, params);
  a.q = q;
  a.k = k;
  a.v = v;
  a.out = out;
  a.dout = dout;
  a.lse = lse;
  a.dq = dq;
  a.dk = dk;
  a.dv = dv;
  const int64_t rows = shape.batch * shape.heads * shape.seq_q;
  StreamScratch delta(static_cast<size_t>(rows), stream);
  if (rows > 0) {
    constexpr int kRowsPerBlock = kAttentionThreads / 32;
    attention_delta_kernel<<<static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock),
                             kAttentionThreads, 0, stream>>>(a, rows, delta.get());
    MGT_CUDA_CHECK_LAUNCH(attention_delta_kernel);
  }
  a.delta = delta.get();
  if (shape.head_dim <= 64) {
    backward<64>(a, shape.batch, stream);
  } else if (shape.head_dim <= 128) {
    backward<128>(a, shape.batch, stream);
  } else {
    backward<256>(a, shape.batch, stream);
  }
}

}  // namespace mgt::cuda
