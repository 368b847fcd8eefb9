#include "kernels/cuda/fp8_quantize.hpp"

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_pipeline.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "kernels/cuda/fp8_encode.cuh"
#include "kernels/cuda/gelu.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vector8.cuh"

namespace mgt::cuda {
namespace {

// A transposing cast block works on tiles of 128 rows × 64 columns of x: each of its 256 threads
// loads four groups of 8 consecutive elements of a row (16-byte loads of bf16/fp16, two of fp32),
// all four in flight before any is used, so a warp reads 4 rows × 64 elements, whole sectors, per
// group. Rowwise codes go out as 8-byte stores, a warp writing 4 rows × 64 bytes; transposed codes
// are gathered from the tile in shared memory so that a warp writes 2 rows of the transposed
// matrix × 128 bytes, equally whole.
constexpr int kTile = 64;  // columns of x per tile
constexpr int kTileRows = 128;
constexpr int kCastThreads = 256;
constexpr int kGroupsPerRow = kTile / 8;
constexpr int kGroupsPerColumn = kTileRows / 8;
constexpr int kGroupsPerThread = kTileRows * kGroupsPerRow / kCastThreads;
static_assert(kGroupsPerThread * kCastThreads == kTileRows * kGroupsPerRow);
static_assert(kGroupsPerThread * kCastThreads == kTile * kGroupsPerColumn);
// The codes' tile is written in rows and read in columns: one 4-byte word of padding per row
// spreads a column's bytes over the banks (reads stay at most 2-way conflicted).
constexpr int kTileStride = kTile + 4;

// The rowwise-only cast is element-wise: each thread of a grid-stride loop keeps this many
// 8-element groups in flight, and a block folds its amax in once, however many it casts.
constexpr int kRowwiseGroupsPerThread = 4;
constexpr unsigned kRowwiseBlocksPerSm = 8;

// Blocks of the current-scaling amax pass: a grid-stride loop, enough to keep every SM busy, few
// enough that the atomics (one per block) are nothing.
constexpr int kAmaxBlocks = 1024;

// fp8_current_scale of kernels/fp8.cpp (IEEE division, as the CPU's; no fast-math reciprocal).
__device__ __forceinline__ float current_scale(float amax, float fp8_max) {
  if (isinf(amax) || isnan(amax) || amax == 0.0f) return 1.0f;
  const float s = __fdiv_rn(fp8_max, amax);
  return isinf(s) ? FLT_MAX : s;
}

struct CastArgs {
  In x;
  int64_t rows = 0;
  int64_t cols = 0;
  float* scale = nullptr;               // read (delayed scaling) or written by block 0 (current)
  const float* current_amax = nullptr;  // current scaling: the scale is derived from this amax
  int* record_amax = nullptr;           // delayed scaling: max |x| folded in here (may be null)
  float fp8_max = 0.0f;
  uint8_t* rowwise = nullptr;
  float* rowwise_scale_inv = nullptr;
  uint8_t* transposed = nullptr;
  float* transposed_scale_inv = nullptr;
  bool load_vector = false;        // cols % 8 == 0, x 16-byte aligned
  bool rowwise_vector = false;     // cols % 8 == 0, rowwise 8-byte aligned
  bool transposed_vector = false;  // rows % 8 == 0, transposed 8-byte aligned
  // The gradient cast (fp8_quantize_gradient): x is dy; with pre, what is cast is
  // gelu_tanh_grad(dy, pre) rounded to dy's type, also stored to dpre where that is not null;
  // the block's column sums go to dbias_partial[blockIdx.y][cols] where that is not null.
  In pre;
  Out dpre;
  float* dbias_partial = nullptr;
  // The forward cast of an activation (fp8_quantize_gelu_tanh): x is the GELU's input, and what is
  // cast is gelu_tanh(x) rounded to x's type, as gelu_tanh_forward would have stored it.
  bool gelu_tanh = false;
};

// The scale every block casts with. Every block derives the same one; the first thread of the
// grid publishes it (current scaling) and its inverse.
__device__ __forceinline__ float cast_scale(const CastArgs& a) {
  const float scale = a.current_amax != nullptr ? current_scale(*a.current_amax, a.fp8_max) : *a.scale;
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
    if (a.current_amax != nullptr) *a.scale = scale;
    const float inverse = __fdiv_rn(1.0f, scale);
    if (a.rowwise_scale_inv != nullptr) *a.rowwise_scale_inv = inverse;
    if (a.transposed_scale_inv != nullptr) *a.transposed_scale_inv = inverse;
  }
  return scale;
}

// Column tile blockIdx.x; row tiles from blockIdx.y in steps of gridDim.y.
template <bool kE5M2, bool kTransposed>
__global__ void __launch_bounds__(kCastThreads) cast_kernel(CastArgs a) {
  __shared__ uint32_t tile_words[kTileRows * kTileStride / 4];
  auto* const tile = reinterpret_cast<uint8_t*>(tile_words);
  const float scale = cast_scale(a);
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTile;
  int amax_bits = 0;
  for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTileRows; r0 < a.rows;
       r0 += static_cast<int64_t>(gridDim.y) * kTileRows) {
    // Both groups' loads are issued before any store (the compiler may not move a load of x
    // past a store to the codes, which could alias it): twice the bytes in flight per thread.
    float v[kGroupsPerThread][8];
#pragma unroll
    for (int g = 0; g < kGroupsPerThread; ++g) {
      const int group = static_cast<int>(threadIdx.x) + g * kCastThreads;
      const int64_t r = r0 + group / kGroupsPerRow;
      const int64_t c = c0 + group % kGroupsPerRow * 8;
      if (r < a.rows && c + 8 <= a.cols && a.load_vector) {
        load8(a.x, (r * a.cols + c) / 8, v[g]);
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) v[g][j] = r < a.rows && c + j < a.cols ? a.x[r * a.cols + c + j] : 0.0f;
      }
    }
#pragma unroll
    for (int g = 0; g < kGroupsPerThread; ++g) {
      const int group = static_cast<int>(threadIdx.x) + g * kCastThreads;
      const int tr = group / kGroupsPerRow;
      const int tc = group % kGroupsPerRow * 8;
      const int64_t r = r0 + tr;
      const int64_t c = c0 + tc;
#pragma unroll
      for (int j = 0; j < 8; ++j) amax_bits = max(amax_bits, magnitude_bits(v[g][j]));
      const uint2 codes = encode8<kE5M2>(v[g], scale);
      if (a.rowwise != nullptr && r < a.rows) {
        uint8_t* const dst = a.rowwise + r * a.cols + c;
        if (c + 8 <= a.cols && a.rowwise_vector) {
          *reinterpret_cast<uint2*>(dst) = codes;
        } else {
          for (int j = 0; j < 8 && c + j < a.cols; ++j) dst[j] = code_at(codes, j);
        }
      }
      if constexpr (kTransposed) {
        auto* const word = reinterpret_cast<uint32_t*>(tile + tr * kTileStride + tc);
        word[0] = codes.x;
        word[1] = codes.y;
      }
    }
    if constexpr (kTransposed) {
      __syncthreads();  // the whole tile is in shared memory
#pragma unroll
      for (int g = 0; g < kGroupsPerThread; ++g) {
        const int group = static_cast<int>(threadIdx.x) + g * kCastThreads;
        const int tc = group / kGroupsPerColumn;     // a column of x: a row of the transposed codes
        const int tr = group % kGroupsPerColumn * 8;  // its first of 8 consecutive rows of x
        const int64_t c = c0 + tc;
        const int64_t r = r0 + tr;
        if (c >= a.cols || r >= a.rows) continue;
        uint32_t lo = 0;
        uint32_t hi = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          lo |= static_cast<uint32_t>(tile[(tr + j) * kTileStride + tc]) << (8 * j);
          hi |= static_cast<uint32_t>(tile[(tr + 4 + j) * kTileStride + tc]) << (8 * j);
        }
        const uint2 codes = make_uint2(lo, hi);
        uint8_t* const dst = a.transposed + c * a.rows + r;
        if (r + 8 <= a.rows && a.transposed_vector) {
          *reinterpret_cast<uint2*>(dst) = codes;
        } else {
          for (int j = 0; j < 8 && r + j < a.rows; ++j) dst[j] = code_at(codes, j);
        }
      }
      __syncthreads();  // read out before the next tile overwrites it
    }
  }
  if (a.record_amax != nullptr) record_block_amax(amax_bits, a.record_amax);
}

// The transposing cast of the common shapes (cols % 8 == 0, rows % 16 == 0, x and both codes
// 16-byte aligned), Transformer Engine's cast-transpose: tiles of 128 rows × 64 columns; thread
// (q, o) = (thread / 8, thread % 8) loads the 4 rows 4q..4q+3 of the 8 columns 8o..8o+7, so that
// each of a warp's loads takes 4 rows × 64 columns (whole 128-byte lines of a bf16 x; loads of
// 16 rows' 32-byte sectors each were 9–21% slower on an H200). It writes their rowwise codes,
// and turns its 4×8 codes into 8 words of 4 rows of one column, stored at tile[column][q]. The
// tile is then read out a column at a time, 16 bytes (16 rows) per thread, and written as the
// transposed codes' rows: a warp writes 4 × 128 whole bytes. Row stride 33 words: a warp's word
// stores (4 consecutive q, 8 columns 8 apart) touch each bank at most twice, its word loads (8
// consecutive 16-byte pieces of 4 consecutive columns) every bank once. With no transposed codes
// wanted it is the rowwise cast of the same shapes (its staged loads are what make it fast).
constexpr int kCtRows = 128;
constexpr int kCtCols = 64;
constexpr int kCtStride = kCtRows / 4 + 1;

// The cast-transpose kernel is compiled for bf16 operands (kBf16: FP8 training's activations and
// gradients, no per-element choice of conversion, which had taken a third of the gradient cast's
// instructions) and for any type read from the operand.
template <bool kBf16>
__device__ __forceinline__ float x_element(const CastArgs& a, unsigned short bits) {
  if constexpr (kBf16) {
    return __uint_as_float(static_cast<unsigned>(bits) << 16);
  } else {
    return narrow_to_float(bits, a.x.bf16());
  }
}

// v rounded to x's type, as a kernel storing it there and reading it back would see it.
template <bool kBf16>
__device__ __forceinline__ float rounded_to_x(const CastArgs& a, float v) {
  if constexpr (kBf16) {
    return __uint_as_float(static_cast<unsigned>(__bfloat16_as_ushort(__float2bfloat16_rn(v))) << 16);
  } else {
    return a.x.narrow() ? narrow_to_float(float_to_narrow(v, a.x.bf16()), a.x.bf16()) : v;
  }
}

template <bool kBf16>
__device__ __forceinline__ bool x_is_narrow(const CastArgs& a) {
  return kBf16 || a.x.narrow();
}

// The transposed layout's words from four rows' codes (8 bytes each): word j holds byte j of rows
// 0..3, row i in byte i. Two 4 × 4 byte transposes of byte permutes (PRMT), 16 instructions where
// extracting and shifting each byte took about 100.
__device__ __forceinline__ void transpose_codes(const uint2 (&rows)[4], uint32_t (&columns)[8]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const uint32_t r0 = half == 0 ? rows[0].x : rows[0].y;
    const uint32_t r1 = half == 0 ? rows[1].x : rows[1].y;
    const uint32_t r2 = half == 0 ? rows[2].x : rows[2].y;
    const uint32_t r3 = half == 0 ? rows[3].x : rows[3].y;
    const uint32_t low01 = __byte_perm(r0, r1, 0x5140);   // r0.b0 r1.b0 r0.b1 r1.b1
    const uint32_t high01 = __byte_perm(r0, r1, 0x7362);  // r0.b2 r1.b2 r0.b3 r1.b3
    const uint32_t low23 = __byte_perm(r2, r3, 0x5140);
    const uint32_t high23 = __byte_perm(r2, r3, 0x7362);
    columns[4 * half + 0] = __byte_perm(low01, low23, 0x5410);  // r0.b0 r1.b0 r2.b0 r3.b0
    columns[4 * half + 1] = __byte_perm(low01, low23, 0x7632);  // r0.b1 r1.b1 r2.b1 r3.b1
    columns[4 * half + 2] = __byte_perm(high01, high23, 0x5410);
    columns[4 * half + 3] = __byte_perm(high01, high23, 0x7632);
  }
}

// The gradient cast's work on a thread's 4 rows × 8 columns v of dy: with pre (its values p),
// v becomes gelu_tanh_grad(v, p) rounded to dy's type (so that the codes, dpre and dbias are those
// of gelu_tanh_backward's output, cast and summed), stored to dpre (rows r.., columns c..) where
// given; the columns' sums of v are added to sums.
template <bool kBf16>
__device__ __forceinline__ void gradient_of_quad(const CastArgs& a, int64_t r, int64_t c, float (&v)[4][8],
                                                 const float (&p)[4][8], float (&sums)[8]) {
  if (a.pre != nullptr) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[i][j] = rounded_to_x<kBf16>(a, gelu_tanh_grad(v[i][j], p[i][j]));
      if (a.dpre != nullptr) store8(a.dpre, ((r + i) * a.cols + c) / 8, v[i]);
    }
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) sums[j] += (v[0][j] + v[1][j]) + (v[2][j] + v[3][j]);
}

// A thread's 4 rows × 8 columns of the GELU's input become its output, rounded to x's type.
template <bool kBf16>
__device__ __forceinline__ void activate_quad(const CastArgs& a, float (&v)[4][8]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) v[i][j] = rounded_to_x<kBf16>(a, gelu_tanh(v[i][j]));
  }
}

// The block's column sums into dbias_partial[blockIdx.y]: lanes l, l + 8, l + 16 and l + 24 of a
// warp hold octet l of its 4 row quads; the 8 warps' sums are then added in warp order. A fixed
// order: the sums do not vary from run to run.
__device__ __forceinline__ void store_block_column_sums(const CastArgs& a, float (&sums)[8], int octet, int64_t c0) {
  __shared__ float warp_sums[kCastThreads / 32][kCtCols];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    sums[j] += __shfl_xor_sync(0xffffffffu, sums[j], 8);
    sums[j] += __shfl_xor_sync(0xffffffffu, sums[j], 16);
  }
  const int t = static_cast<int>(threadIdx.x);
  if (t % 32 < 8) {
#pragma unroll
    for (int j = 0; j < 8; ++j) warp_sums[t / 32][octet * 8 + j] = sums[j];
  }
  __syncthreads();
  if (t < kCtCols && c0 + t < a.cols) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kCastThreads / 32; ++w) total += warp_sums[w][t];
    a.dbias_partial[static_cast<int64_t>(blockIdx.y) * a.cols + c0 + t] = total;
  }
}

// dbias[c] += Σ_k partial[k][c] over the cast's row blocks, in order (= without `accumulate`).
__global__ void __launch_bounds__(kThreads)
    finish_column_sums_kernel(const float* partial, int64_t blocks, int64_t cols, float* dbias, bool accumulate) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float total = 0.0f;
  for (int64_t k = 0; k < blocks; ++k) total += partial[k * cols + c];
  dbias[c] = accumulate ? dbias[c] + total : total;
}

// The cast-transpose kernel's loads go through shared memory, a tile ahead: each thread copies
// (cp.async) its 4 rows × 8 columns of the next tile — of dy and pre, for the gradient cast — into
// its own slots of a two-stage buffer, then casts the current tile while those loads are in flight,
// so that a block keeps memory busy through its arithmetic (loading then casting in turn, the
// kernel moved 1.3–2.1 TB/s on an H200, then up to 3.5). A thread reads back only its own slots: no
// barrier guards them. Slots: [stage][tensor][row i][16-byte chunk][thread].
constexpr int kStages = 2;

__host__ __device__ constexpr int staged_chunks(bool narrow) { return narrow ? 1 : 2; }  // per 8 elements

__device__ __forceinline__ uint4* stage_slot(uint4* staged, int stage, int tensors, int chunks, int tensor, int row,
                                            int chunk) {
  return staged + ((((stage * tensors + tensor) * 4 + row) * chunks + chunk) * kCastThreads + threadIdx.x);
}

// The copies of rows r..r+3, columns c..c+7 of x (and pre) into `stage`, as one committed group
// (empty where the rows lie past the end, so that every thread commits alike).
__device__ __forceinline__ void stage_quad(const CastArgs& a, uint4* staged, int stage, int tensors, int chunks,
                                           int64_t r, int64_t c) {
  if (r < a.rows && c < a.cols) {
    for (int t = 0; t < tensors; ++t) {
      const auto* base = static_cast<const char*>(t == 0 ? a.x.raw() : a.pre.raw());
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        for (int k = 0; k < chunks; ++k) {
          __pipeline_memcpy_async(stage_slot(staged, stage, tensors, chunks, t, i, k),
                                  base + ((r + i) * a.cols + c) * a.x.element_bytes() + 16 * k, 16);
        }
      }
    }
  }
  __pipeline_commit();
}

// Row i of a thread's staged values of tensor t (x's type) as floats.
template <bool kBf16>
__device__ __forceinline__ void unstage8(const CastArgs& a, uint4* staged, int stage, int tensors, int chunks, int t,
                                         int i, float (&out)[8]) {
  const uint4 w = *stage_slot(staged, stage, tensors, chunks, t, i, 0);
  if (x_is_narrow<kBf16>(a)) {
    const auto* h = reinterpret_cast<const unsigned short*>(&w);
#pragma unroll
    for (int j = 0; j < 8; ++j) out[j] = x_element<kBf16>(a, h[j]);
  } else {
    const uint4 w2 = *stage_slot(staged, stage, tensors, chunks, t, i, 1);
    const uint32_t words[8] = {w.x, w.y, w.z, w.w, w2.x, w2.y, w2.z, w2.w};
#pragma unroll
    for (int j = 0; j < 8; ++j) out[j] = __uint_as_float(words[j]);
  }
}

// Dynamic shared memory of the staging for x (and pre) of x's type.
size_t staging_bytes(bool narrow, bool with_pre) {
  return static_cast<size_t>(kStages) * (with_pre ? 2 : 1) * 4 * staged_chunks(narrow) * kCastThreads * 16;
}

// kGrad: the gradient cast's additions (CastArgs::pre, dpre, dbias_partial), each where given.
// kBf16: x (and pre) are bf16.
template <bool kE5M2, bool kGrad, bool kBf16>
__global__ void __launch_bounds__(kCastThreads) cast_transpose_kernel(CastArgs a) {
  extern __shared__ uint4 staged[];
  __shared__ uint32_t tile[kCtCols * kCtStride];
  float column_sums[8] = {};
  const float scale = cast_scale(a);
  const int quad = static_cast<int>(threadIdx.x) / 8;   // 0..31
  const int octet = static_cast<int>(threadIdx.x) % 8;  // 0..7
  const int tensors = kGrad && a.pre != nullptr ? 2 : 1;
  const int chunks = staged_chunks(x_is_narrow<kBf16>(a));
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kCtCols;
  const int64_t c = c0 + octet * 8;
  const int64_t step = static_cast<int64_t>(gridDim.y) * kCtRows;
  int amax_bits = 0;
  int stage = 0;
  stage_quad(a, staged, stage, tensors, chunks, static_cast<int64_t>(blockIdx.y) * kCtRows + quad * 4, c);
  for (int64_t r0 = static_cast<int64_t>(blockIdx.y) * kCtRows; r0 < a.rows; r0 += step) {
    const int64_t r = r0 + quad * 4;
    stage_quad(a, staged, stage ^ 1, tensors, chunks, r + step, c);  // the next tile's, in flight
    __pipeline_wait_prior(1);                                          // this tile's have landed
    // rows % 16 == 0: a quad is whole or wholly outside; cols % 8 == 0: so is an octet.
    const bool inside = r < a.rows && c < a.cols;
    if (inside) {
      float v[4][8];
#pragma unroll
      for (int i = 0; i < 4; ++i) unstage8<kBf16>(a, staged, stage, tensors, chunks, 0, i, v[i]);
      if constexpr (kGrad) {
        float p[4][8] = {};
        if (tensors == 2) {
#pragma unroll
          for (int i = 0; i < 4; ++i) unstage8<kBf16>(a, staged, stage, tensors, chunks, 1, i, p[i]);
        }
        gradient_of_quad<kBf16>(a, r, c, v, p, column_sums);
      } else if (a.gelu_tanh) {
        activate_quad<kBf16>(a, v);
      }
      uint2 codes[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 8; ++j) amax_bits = max(amax_bits, magnitude_bits(v[i][j]));
        codes[i] = encode8<kE5M2>(v[i], scale);
        if (a.rowwise != nullptr) *reinterpret_cast<uint2*>(a.rowwise + (r + i) * a.cols + c) = codes[i];
      }
      if (a.transposed != nullptr) {
        uint32_t columns[8];
        transpose_codes(codes, columns);
#pragma unroll
        for (int j = 0; j < 8; ++j) tile[(octet * 8 + j) * kCtStride + quad] = columns[j];
      }
    }
    if (a.transposed == nullptr) {  // rowwise codes alone (uniform across the grid)
      stage ^= 1;
      continue;
    }
    __syncthreads();  // the whole tile is in shared memory
#pragma unroll
    for (int k = 0; k < kCtCols * (kCtRows / 16) / kCastThreads; ++k) {
      const int piece = static_cast<int>(threadIdx.x) + k * kCastThreads;
      const int column = piece / (kCtRows / 16);
      const int part = piece % (kCtRows / 16);  // rows 16·part..16·part+15 of the tile
      const int64_t gc = c0 + column;
      const int64_t gr = r0 + part * 16;
      if (gc >= a.cols || gr >= a.rows) continue;
      const uint32_t* const src = tile + column * kCtStride + part * 4;
      *reinterpret_cast<uint4*>(a.transposed + gc * a.rows + gr) = make_uint4(src[0], src[1], src[2], src[3]);
    }
    __syncthreads();  // read out before the next tile overwrites it
    stage ^= 1;
  }
  __pipeline_wait_prior(0);
  if (a.record_amax != nullptr) record_block_amax(amax_bits, a.record_amax);
  if constexpr (kGrad) {
    if (a.dbias_partial != nullptr) store_block_column_sums(a, column_sums, octet, c0);
  }
}

int multiprocessors() {
  static const int count = [] {
    int device = 0;
    int sms = 0;
    MGT_CUDA_CHECK(cudaGetDevice(&device));
    MGT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
  }();
  return count;
}

// The cast-transpose grid: a block per column tile and, down the rows, as many blocks as fill the
// multiprocessors in one wave as far as the kernel's resources allow (at least one), each going
// down its rows a tile at a time (the staging pays off over several tiles).
template <bool kE5M2, bool kGrad, bool kBf16>
dim3 cast_transpose_grid(const CastArgs& a, size_t smem) {
  static const bool opted_in = [] {  // the largest staging (fp32 with pre) beyond the default 48 KB
    MGT_CUDA_CHECK(cudaFuncSetAttribute(cast_transpose_kernel<kE5M2, kGrad, kBf16>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(staging_bytes(false, true))));
    return true;
  }();
  (void)opted_in;
  int resident = 0;
  MGT_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, cast_transpose_kernel<kE5M2, kGrad, kBf16>, kCastThreads, smem));
  const int64_t col_tiles = (a.cols + kCtCols - 1) / kCtCols;
  const int64_t row_tiles = (a.rows + kCtRows - 1) / kCtRows;
  const int64_t slots = static_cast<int64_t>(std::max(resident, 1)) * multiprocessors();
  const int64_t down = std::clamp<int64_t>(slots / col_tiles, 1, std::min<int64_t>(row_tiles, 65535));
  return dim3(static_cast<unsigned>(col_tiles), static_cast<unsigned>(down));
}

template <bool kE5M2, bool kBf16>
void launch_cast_transpose_of(const CastArgs& a, cudaStream_t stream) {
  const size_t smem = staging_bytes(a.x.narrow(), false);
  cast_transpose_kernel<kE5M2, false, kBf16>
      <<<cast_transpose_grid<kE5M2, false, kBf16>(a, smem), kCastThreads, smem, stream>>>(a);
  MGT_CUDA_CHECK_LAUNCH(cast_transpose_kernel);
}

template <bool kE5M2>
void launch_cast_transpose(const CastArgs& a, cudaStream_t stream) {
  if (a.x.bf16()) {
    launch_cast_transpose_of<kE5M2, true>(a, stream);
  } else {
    launch_cast_transpose_of<kE5M2, false>(a, stream);
  }
}

// The gradient cast, with the bias gradient's partial sums (a row per block down the rows) where
// dbias is not null, then their sum added to dbias (written over it without accumulate_dbias).
template <bool kE5M2, bool kBf16>
void launch_gradient_cast(CastArgs a, float* dbias, bool accumulate_dbias, cudaStream_t stream) {
  const size_t smem = staging_bytes(a.x.narrow(), a.pre != nullptr);
  const dim3 grid = cast_transpose_grid<kE5M2, true, kBf16>(a, smem);
  const size_t partial_bytes = static_cast<size_t>(grid.y) * static_cast<size_t>(a.cols) * sizeof(float);
  if (dbias != nullptr) MGT_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&a.dbias_partial), partial_bytes, stream));
  cast_transpose_kernel<kE5M2, true, kBf16><<<grid, kCastThreads, smem, stream>>>(a);
  MGT_CUDA_CHECK_LAUNCH(cast_transpose_kernel);
  if (dbias == nullptr) return;
  finish_column_sums_kernel<<<static_cast<unsigned>((a.cols + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      a.dbias_partial, grid.y, a.cols, dbias, accumulate_dbias);
  MGT_CUDA_CHECK_LAUNCH(finish_column_sums_kernel);
  MGT_CUDA_CHECK(cudaFreeAsync(a.dbias_partial, stream));
}

// Rowwise codes alone of a 16-byte aligned x with n % 8 == 0 and 8-byte aligned codes, where the
// cast-transpose kernel's shapes do not hold: groups of 8 elements in a grid-stride loop.
template <bool kE5M2>
__global__ void __launch_bounds__(kThreads) cast_rowwise_kernel(CastArgs a) {
  const float scale = cast_scale(a);
  const int64_t groups = a.rows * a.cols / 8;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x * kRowwiseGroupsPerThread;
  int amax_bits = 0;
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x * kRowwiseGroupsPerThread + threadIdx.x;
       first < groups; first += step) {
    float v[kRowwiseGroupsPerThread][8];
#pragma unroll
    for (int u = 0; u < kRowwiseGroupsPerThread; ++u) {
      const int64_t g = first + static_cast<int64_t>(u) * blockDim.x;
      if (g < groups) load8(a.x, g, v[u]);
    }
#pragma unroll
    for (int u = 0; u < kRowwiseGroupsPerThread; ++u) {
      const int64_t g = first + static_cast<int64_t>(u) * blockDim.x;
      if (g >= groups) break;
#pragma unroll
      for (int j = 0; j < 8; ++j) amax_bits = max(amax_bits, magnitude_bits(v[u][j]));
      reinterpret_cast<uint2*>(a.rowwise)[g] = encode8<kE5M2>(v[u], scale);
    }
  }
  if (a.record_amax != nullptr) record_block_amax(amax_bits, a.record_amax);
}

// Current scaling's first pass: max |x| into *amax (zeroed before).
__global__ void __launch_bounds__(kThreads) absolute_max_kernel(In x, int64_t n, bool vector, int* amax) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t groups = vector ? n / 8 : 0;
  int bits = 0;
  for (int64_t g = first; g < groups; g += step) {
    float v[8];
    load8(x, g, v);
#pragma unroll
    for (int j = 0; j < 8; ++j) bits = max(bits, magnitude_bits(v[j]));
  }
  for (int64_t i = groups * 8 + first; i < n; i += step) bits = max(bits, magnitude_bits(x[i]));
  record_block_amax(bits, amax);
}

__global__ void __launch_bounds__(kThreads)
    dequantize_kernel(const uint8_t* codes, int64_t n, bool e5m2, const float* scale_inv, float* out) {
  const float s = *scale_inv;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    // Every E4M3 and E5M2 value is an fp16 value: the conversion is exact.
    const __half h(__nv_cvt_fp8_to_halfraw(codes[i], e5m2 ? __NV_E5M2 : __NV_E4M3));
    out[i] = __fmul_rn(__half2float(h), s);
  }
}

bool aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// The cast-transpose kernel's shapes: rows % 16 == 0, cols % 8 == 0, x and the codes wanted
// 16-byte aligned (rowwise codes alone included: its staged loads make it the fast rowwise cast).
bool cast_transpose_suits(const CastArgs& a) {
  return a.cols % 8 == 0 && a.rows % 16 == 0 && a.load_vector && (a.rowwise == nullptr || aligned16(a.rowwise)) &&
         (a.transposed == nullptr || aligned16(a.transposed));
}

// The arguments every cast shares: x [rows, cols], the scale, the format and the outputs wanted.
CastArgs cast_args(In x, int64_t rows, int64_t cols, float* scale, Fp8CastFormat format, Fp8CastOutput rowwise,
                   Fp8CastOutput transposed) {
  CastArgs a;
  a.x = x;
  a.rows = rows;
  a.cols = cols;
  a.scale = scale;
  a.fp8_max = format.max;
  a.rowwise = rowwise.codes;
  a.rowwise_scale_inv = rowwise.codes != nullptr ? rowwise.scale_inv : nullptr;
  a.transposed = transposed.codes;
  a.transposed_scale_inv = transposed.codes != nullptr ? transposed.scale_inv : nullptr;
  a.load_vector = cols % 8 == 0 && aligned16(x.raw());
  a.rowwise_vector = cols % 8 == 0 && aligned(rowwise.codes, 8);
  a.transposed_vector = rows % 8 == 0 && aligned(transposed.codes, 8);
  return a;
}

template <bool kE5M2>
void launch_cast(const CastArgs& a, dim3 grid, bool transposed, cudaStream_t stream) {
  const int64_t n = a.rows * a.cols;
  if (cast_transpose_suits(a)) {
    launch_cast_transpose<kE5M2>(a, stream);
    return;
  }
  if (!transposed && n % 8 == 0 && a.load_vector && a.rowwise_vector) {
    const int64_t per_block = static_cast<int64_t>(kThreads) * kRowwiseGroupsPerThread * 8;
    const int64_t blocks = std::clamp<int64_t>((n + per_block - 1) / per_block, 1,
                                               static_cast<int64_t>(multiprocessors()) * kRowwiseBlocksPerSm);
    cast_rowwise_kernel<kE5M2><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
    MGT_CUDA_CHECK_LAUNCH(cast_rowwise_kernel);
    return;
  }
  if (transposed) {
    cast_kernel<kE5M2, true><<<grid, kCastThreads, 0, stream>>>(a);
  } else {
    cast_kernel<kE5M2, false><<<grid, kCastThreads, 0, stream>>>(a);
  }
  MGT_CUDA_CHECK_LAUNCH(cast_kernel);
}

}  // namespace

void fp8_quantize(In x, int64_t rows, int64_t cols, float* scale, float* amax, bool current, Fp8CastFormat format,
                  Fp8CastOutput rowwise, Fp8CastOutput transposed, cudaStream_t stream) {
  const int64_t n = rows * cols;
  // Rowwise codes alone are an element-wise cast: [rows, cols] is cast as [n / 64, 64] where it
  // can be, so that narrow rows do not leave most of each tile idle.
  const bool reshaped = transposed.codes == nullptr && n % kTile == 0;
  CastArgs a = cast_args(x, reshaped ? n / kTile : rows, reshaped ? kTile : cols, scale, format, rowwise, transposed);
  if (current) {
    MGT_CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
    if (n > 0) {
      const bool vector = aligned16(x.raw());
      const unsigned blocks = std::min<unsigned>(grid_for(vector ? (n + 7) / 8 : n), kAmaxBlocks);
      absolute_max_kernel<<<blocks, kThreads, 0, stream>>>(x, n, vector, reinterpret_cast<int*>(amax));
      MGT_CUDA_CHECK_LAUNCH(absolute_max_kernel);
    }
    a.current_amax = amax;
  } else {
    a.record_amax = reinterpret_cast<int*>(amax);  // null where no amax is recorded
  }
  const int64_t col_tiles = std::max<int64_t>(1, (a.cols + kTile - 1) / kTile);
  const int64_t row_tiles = std::max<int64_t>(1, (a.rows + kTileRows - 1) / kTileRows);
  if (col_tiles > INT_MAX) throw Error("fp8_quantize: " + std::to_string(cols) + " columns are too many");
  const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(std::min<int64_t>(row_tiles, 65535)));
  if (format.e5m2) {
    launch_cast<true>(a, grid, transposed.codes != nullptr, stream);
  } else {
    launch_cast<false>(a, grid, transposed.codes != nullptr, stream);
  }
}

bool fp8_quantize_gradient(In dy, In pre, int64_t rows, int64_t cols, float* scale, float* amax, Fp8CastFormat format,
                           Fp8CastOutput rowwise, Fp8CastOutput transposed, float* dbias, bool accumulate_dbias,
                           Out dpre, cudaStream_t stream) {
  CastArgs a = cast_args(dy, rows, cols, scale, format, rowwise, transposed);
  const bool pre_suits = pre == nullptr || (pre.type() == dy.type() && aligned16(pre.raw()));
  const bool dpre_suits = dpre == nullptr || (dpre.type() == dy.type() && aligned16(dpre.raw()));
  if (rows <= 0 || cols <= 0 || rowwise.codes == nullptr || transposed.codes == nullptr || !cast_transpose_suits(a) ||
      !pre_suits || !dpre_suits)
    return false;
  a.record_amax = reinterpret_cast<int*>(amax);
  a.pre = pre;
  a.dpre = dpre;
  if (format.e5m2) {
    if (dy.bf16()) {
      launch_gradient_cast<true, true>(a, dbias, accumulate_dbias, stream);
    } else {
      launch_gradient_cast<true, false>(a, dbias, accumulate_dbias, stream);
    }
  } else {
    if (dy.bf16()) {
      launch_gradient_cast<false, true>(a, dbias, accumulate_dbias, stream);
    } else {
      launch_gradient_cast<false, false>(a, dbias, accumulate_dbias, stream);
    }
  }
  return true;
}

bool fp8_quantize_gelu_tanh(In pre, int64_t rows, int64_t cols, float* scale, float* amax, Fp8CastFormat format,
                            Fp8CastOutput rowwise, Fp8CastOutput transposed, cudaStream_t stream) {
  CastArgs a = cast_args(pre, rows, cols, scale, format, rowwise, transposed);
  if (rows <= 0 || cols <= 0 || (rowwise.codes == nullptr && transposed.codes == nullptr) || !cast_transpose_suits(a))
    return false;
  a.record_amax = reinterpret_cast<int*>(amax);
  a.gelu_tanh = true;
  if (format.e5m2) {
    launch_cast_transpose<true>(a, stream);
  } else {
    launch_cast_transpose<false>(a, stream);
  }
  return true;
}

void fp8_dequantize(const uint8_t* codes, int64_t n, bool e5m2, const float* scale_inv, float* out,
                    cudaStream_t stream) {
  if (n == 0) return;
  dequantize_kernel<<<grid_for(n), kThreads, 0, stream>>>(codes, n, e5m2, scale_inv, out);
  MGT_CUDA_CHECK_LAUNCH(dequantize_kernel);
}

}  // namespace mgt::cuda
