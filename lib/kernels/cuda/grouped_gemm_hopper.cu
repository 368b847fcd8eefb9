// The grouped GEMMs of grouped_gemm_hopper.hpp: a persistent, warp-specialized kernel on Hopper's
// asynchronous tensor-core instructions. Compiled for sm_90a only (wgmma, setmaxnreg); the
// library's other kernels stay sm_90.
//
// Each block holds one multiprocessor: a producer warp loads tiles of 128 rows of A and 256 (or
// 128) rows of B, 128 bytes of k each (64 bf16 or 128 FP8 values), into a ring of shared-memory
// stages with the tensor memory accelerator (TMA, each group's operands described by a tensor
// map, rows and columns past the group's end read as zeros), and two consumer warpgroups
// multiply them with wgmma (64×256 or 64×128 each, fp32 accumulators in registers). The blocks take the tiles of every group in turn. A finished tile leaves through
// shared memory by TMA stores (or TMA's fp32 additions into D), which run on while the
// consumers start the next tile, whose first stages the producer has already filled. Stored
// straight from registers, the tiles had held the kernel to 0.42–0.88 of cuBLAS's speed while
// its main loop alone ran at 0.96–1.77 (BENCHMARKS.md).
#include "kernels/cuda/grouped_gemm_hopper.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "kernels/cuda_check.hpp"

namespace mgt::cuda {
namespace {

constexpr int kBlockM = 128;
constexpr int kThreads = 384;  // the producer's warpgroup and two consumers
constexpr int kMaxGroups = 32;  // per launch; more groups take more launches
// Each consumer writes its 64 rows of a tile through 8 KB boxes of shared memory in turn (64 rows
// of 128 bytes: 64 bf16 or 32 fp32 columns), each stored to D by TMA while the next is filled.
constexpr int kOutBoxBytes = 64 * 128;

// A's element type (B's is bf16 with bf16 A, else E4M3).
enum Operand : int { kOperandBf16 = 0, kOperandE4M3 = 1, kOperandE5M2 = 2 };

// One kernel's tiles. bf16: 128×256 tiles, 64 k per stage, the tensor cores accumulating across
// the whole k. FP8: 128 k per stage (the same 128-byte rows); accumulated the same way on
// 128×256 tiles (fast accumulation), or with the products of each stage's 128 k summed apart and
// added into fp32 accumulators of their own (`kSplit`, Transformer Engine's split accumulator:
// the tensor cores keep fewer bits than fp32 when they add FP8 products into an accumulator),
// which takes twice the registers and so 128×128 tiles. Those tiles' k runs short where a weight gradient's rows are a few
// experts' share: their fp32 additions into the main gradient take as long as their products.
// TMA's reductions into global memory ran at half the speed of loads and stores there, so each
// consumer holds a whole tile's output (four boxes): it loads D's tile into them, adds its sums
// and stores the tile while the next tile's products run. Five stages.
// (The host's pass compiles the kernel's body away, sm_90a code only: members only the body reads
// go unreferenced there.)
#pragma nv_diag_suppress 177
template <int kTransA_, int kTransB_, int kA_, bool kSplit_>
struct Tile {
  static constexpr int kTransA = kTransA_, kTransB = kTransB_, kA = kA_;  // B: bf16 or E4M3 as A
  static constexpr bool kSplit = kSplit_;
  static constexpr bool kFp8 = kA != kOperandBf16;
  static constexpr int kBlockN = kSplit ? 128 : 256;
  static constexpr int kBlockK = kFp8 ? 128 : 64;
  static constexpr int kStepK = kFp8 ? 32 : 16;  // k per wgmma: 32 bytes of each row
  static constexpr int kStages = kSplit ? 5 : 4;
  static constexpr int kOutBoxes = kSplit ? 4 : 2;  // per consumer
  // An fp32 D added to is loaded, added to and stored (else added to by TMA's reduction).
  static constexpr bool kLoadsD = kSplit;
  static_assert(!kLoadsD || kOutBoxes * 32 == kBlockN, "a consumer's whole tile of fp32 in its boxes");
  static constexpr int kTileABytes = kBlockM * 128;
  static constexpr int kTileBBytes = kBlockN * 128;
  static constexpr int kStageBytes = kTileABytes + kTileBBytes;
  static constexpr int kAccumulators = kBlockN / 2;  // a consumer's 64 × kBlockN over 128 threads
  // The stages at a 1,024-byte boundary (the 128-byte swizzle's period), the output boxes, then
  // the barriers.
  static constexpr int kOutOffset = kStages * kStageBytes;
  static constexpr int kBarrierOffset = kOutOffset + 2 * kOutBoxes * kOutBoxBytes;
  static constexpr int kSmemBytes = kBarrierOffset + (2 * kStages + 2) * 8 + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "a multiprocessor's shared memory");
};
#pragma nv_diag_default 177

struct Params {
  CUtensorMap a_map[kMaxGroups];
  CUtensorMap b_map[kMaxGroups];
  CUtensorMap d_map[kMaxGroups];
  // FP8: each group's scale_inv factors of A and B (D takes their product); null for bf16.
  const float* a_scale[kMaxGroups];
  const float* b_scale[kMaxGroups];
  int m[kMaxGroups], n[kMaxGroups], k[kMaxGroups];
  // A group's tiles run down M first: a wave reads a strip of B (a weight) once and the group's
  // A, a few MB, many times from L2.
  int m_tiles[kMaxGroups];
  int tile_start[kMaxGroups + 1];
  int groups;
  int d_f32;
  int accumulate;  // fp32 D only: added to D by TMA's reduction
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MGT_SM90A_KERNEL 1
#endif

#ifdef MGT_SM90A_KERNEL
constexpr int kBoxBytes = 64 * 64 * 2;  // one 64×64 box: a transposed operand's unit

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void barrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}

__device__ __forceinline__ void barrier_expect_bytes(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void barrier_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void barrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// Box (c0: column, c1: row) of `map` into shared memory at dst, counted on `bar`.
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::
          "r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// The 8 KB box at src (64 rows of 128 bytes, 128-byte swizzled) to D at (c0: column, c1: row),
// stored or added; rows and columns past D's end are left out.
__device__ __forceinline__ void tma_store(const CUtensorMap* map, uint32_t src, int c0, int c1, bool add) {
  if (add)
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                     reinterpret_cast<uint64_t>(map)),
                 "r"(src), "r"(c0), "r"(c1)
                 : "memory");
  else
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                     reinterpret_cast<uint64_t>(map)),
                 "r"(src), "r"(c0), "r"(c1)
                 : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// The 128 threads of one consumer warpgroup (named barrier 1 or 2).
__device__ __forceinline__ void warpgroup_sync(int half) {
  asm volatile("bar.sync %0, 128;" ::"r"(half + 1) : "memory");
}

// A wgmma shared-memory descriptor of the 128-byte swizzle: lbo, the byte distance between 64-wide
// blocks along M or N (transposed operands); sbo, between groups of 8 rows.
__device__ __forceinline__ uint64_t smem_descriptor(uint32_t address, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((address & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (1ull << 62);
}

#define MGT_ACC1(i) "+f"(d[i])
#define MGT_ACC8(i) \
  MGT_ACC1(i), MGT_ACC1(i + 1), MGT_ACC1(i + 2), MGT_ACC1(i + 3), MGT_ACC1(i + 4), MGT_ACC1(i + 5), MGT_ACC1(i + 6), \
      MGT_ACC1(i + 7)
#define MGT_ACC64(i) \
  MGT_ACC8(i), MGT_ACC8(i + 8), MGT_ACC8(i + 16), MGT_ACC8(i + 24), MGT_ACC8(i + 32), MGT_ACC8(i + 40), \
      MGT_ACC8(i + 48), MGT_ACC8(i + 56)

// d (64×256 fp32, this warpgroup's fragment) += A·Bᵀ for a 64×16 A and a 256×16 B in bf16.
template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_bf16_64x256(float (&d)[128], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127},"
      " %128, %129, 1, 1, 1, %130, %131;\n"
      "}\n"
      : MGT_ACC64(0), MGT_ACC64(64)
      : "l"(a), "l"(b), "n"(kTransA), "n"(kTransB));
}

// d (64×256) += A·Bᵀ for a 64×32 A and a 256×32 B in E4M3 (the FP8 forward's operands).
__device__ __forceinline__ void wgmma_e4m3_64x256(float (&d)[128], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127},"
      " %128, %129, 1, 1, 1;\n"
      "}\n"
      : MGT_ACC64(0), MGT_ACC64(64)
      : "l"(a), "l"(b));
}

// d (64×128) = A·Bᵀ (+ d where `add`) for a 64×32 A in E4M3 or E5M2 (kA) and a 128×32 B in E4M3.
#define MGT_WGMMA_FP8_64x128(types)                                        \
  asm volatile(                                                           \
      "{\n"                                                               \
      ".reg .pred p;\n"                                                   \
      "setp.ne.b32 p, %66, 0;\n"                                          \
      "wgmma.mma_async.sync.aligned.m64n128k32.f32." types " "            \
      "{"                                                                 \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"  \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"  \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"  \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63},"  \
      " %64, %65, p, 1, 1;\n"                                             \
      "}\n"                                                               \
      : MGT_ACC64(0)                                                      \
      : "l"(a), "l"(b), "r"(add))
template <int kA>
__device__ __forceinline__ void wgmma_fp8_64x128(float (&d)[64], uint64_t a, uint64_t b, int add) {
  if constexpr (kA == kOperandE5M2) {
    MGT_WGMMA_FP8_64x128("e5m2.e4m3");
  } else {
    MGT_WGMMA_FP8_64x128("e4m3.e4m3");
  }
}
#undef MGT_WGMMA_FP8_64x128

// One wgmma step of tile T: d (+)= A·Bᵀ over kStepK of k (`add` 0: d = A·Bᵀ, split tiles only).
template <class T>
__device__ __forceinline__ void wgmma_step(float (&d)[T::kAccumulators], uint64_t a, uint64_t b, int add) {
  if constexpr (!T::kFp8) {
    wgmma_bf16_64x256<T::kTransA, T::kTransB>(d, a, b);
  } else if constexpr (T::kSplit) {
    wgmma_fp8_64x128<T::kA>(d, a, b, add);
  } else {
    wgmma_e4m3_64x256(d, a, b);
  }
}

// Keeps the compiler from moving accumulator reads or writes across the asynchronous wgmma.
template <int kCount>
__device__ __forceinline__ void fence_accumulators(float (&d)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ int group_of_tile(const Params& p, int tile) {
  int g = 0;
  while (tile >= p.tile_start[g + 1]) ++g;
  return g;
}

// A consumer warpgroup's 64 rows of a tile from its accumulators d, times `scale`, to D at
// (col0, row0), through its kBoxes output boxes in turn (`box` counts them). The fragment: register
// 4j + 2i + e holds row 16·warp + lane/4 + 8i, column 8j + 2·(lane%4) + e. A box takes kJPerBox of
// the kCount/4 j: 64 bf16 (8) or 32 fp32 (4) columns. Within a box's row, 16-byte chunk q lies at
// q ^ (row % 8) (the 128-byte swizzle), so that a warp's eight rows write eight different chunks.
// Before a box is refilled, the store that read it kBoxes boxes ago has finished reading.
template <int kJPerBox, int kBoxes, int kCount>
__device__ __forceinline__ void store_tile(const float (&d)[kCount], float scale, const CUtensorMap* map,
                                           uint32_t out_boxes, int& box, bool leader, int half, int col0, int row0,
                                           bool add) {
  const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
#pragma unroll
  for (int j0 = 0; j0 < kCount / 4; j0 += kJPerBox, ++box) {
    const uint32_t out = out_boxes + (box % kBoxes) * kOutBoxBytes;
    if (leader) asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kBoxes - 1) : "memory");
    warpgroup_sync(half);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = 16 * warp + lane / 4 + 8 * i;
#pragma unroll
      for (int jj = 0; jj < kJPerBox; ++jj) {
        const float v0 = d[4 * (j0 + jj) + 2 * i] * scale, v1 = d[4 * (j0 + jj) + 2 * i + 1] * scale;
        const int byte = kJPerBox == 4 ? jj * 32 + (lane % 4) * 8 : jj * 16 + (lane % 4) * 4;
        const uint32_t at = out + row * 128 + ((((byte >> 4) ^ (row % 8)) << 4) | (byte & 15));
        if (kJPerBox == 4) {
          asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(at), "f"(v0), "f"(v1) : "memory");
        } else {
          const __nv_bfloat162 pair = __floats2bfloat162_rn(v0, v1);
          asm volatile("st.shared.b32 [%0], %1;" ::"r"(at), "r"(*reinterpret_cast<const uint32_t*>(&pair))
                       : "memory");
        }
      }
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    warpgroup_sync(half);
    if (leader) tma_store(map, out, col0 + 8 * j0, row0, add);
  }
}

// store_tile's fp32 path for a D added to, the consumer's whole tile already loaded into its
// kBoxes boxes: each box's values plus d·scale, stored by TMA.
template <int kBoxes, int kCount>
__device__ __forceinline__ void add_store_tile(const float (&d)[kCount], float scale, const CUtensorMap* map,
                                               uint32_t out_boxes, bool leader, int half, int col0, int row0) {
  static_assert(kCount == kBoxes * 16, "four j of 8 columns per box of 32");
  const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
#pragma unroll
  for (int b = 0; b < kBoxes; ++b) {
    const uint32_t out = out_boxes + b * kOutBoxBytes;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = 16 * warp + lane / 4 + 8 * i;
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        const int j = 4 * b + jj, byte = jj * 32 + (lane % 4) * 8;
        const uint32_t at = out + row * 128 + ((((byte >> 4) ^ (row % 8)) << 4) | (byte & 15));
        float v0, v1;
        asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v0), "=f"(v1) : "r"(at) : "memory");
        v0 += d[4 * j + 2 * i] * scale;
        v1 += d[4 * j + 2 * i + 1] * scale;
        asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(at), "f"(v0), "f"(v1) : "memory");
      }
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    warpgroup_sync(half);
    if (leader) tma_store(map, out, col0 + 32 * b, row0, false);
  }
}
#endif

template <class T>
__global__ void __launch_bounds__(kThreads, 1) grouped_gemm_kernel(const __grid_constant__ Params p) {
#ifdef MGT_SM90A_KERNEL
  constexpr int kBlockN = T::kBlockN, kBlockK = T::kBlockK, kStages = T::kStages;
  extern __shared__ uint8_t smem[];
  const uint32_t base = (shared_address(smem) + 1023) & ~1023u;
  const uint32_t bars = base + T::kBarrierOffset;
  const auto full = [&](int s) { return bars + 8 * s; };
  const auto empty = [&](int s) { return bars + 8 * (kStages + s); };
  const auto d_loaded = [&](int half) { return bars + 8 * (2 * kStages + half); };  // kLoadsD
  const int warpgroup = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      barrier_init(full(s), 1);
      barrier_init(empty(s), 256);
    }
    for (int half = 0; half < 2; ++half) barrier_init(d_loaded(half), 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  const int tiles = p.tile_start[p.groups];

  if (warpgroup == 0) {  // the producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x != 0) return;
    int stage = 0;
    uint32_t phase = 0;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      const int g = group_of_tile(p, tile);
      const int local = tile - p.tile_start[g];
      const int m0 = local % p.m_tiles[g] * kBlockM, n0 = local / p.m_tiles[g] * kBlockN;
      const int k_blocks = (p.k[g] + kBlockK - 1) / kBlockK;
      for (int kb = 0; kb < k_blocks; ++kb) {
        barrier_wait(empty(stage), phase ^ 1);
        barrier_expect_bytes(full(stage), T::kStageBytes);
        const uint32_t a = base + stage * T::kStageBytes, b = a + T::kTileABytes;
        const int k0 = kb * kBlockK;
        if (T::kTransA == 0) {
          tma_load(a, &p.a_map[g], full(stage), k0, m0);
        } else {
          for (int j = 0; j < kBlockM / 64; ++j) tma_load(a + j * kBoxBytes, &p.a_map[g], full(stage), m0 + 64 * j, k0);
        }
        if (T::kTransB == 0) {
          tma_load(b, &p.b_map[g], full(stage), k0, n0);
        } else {
          for (int j = 0; j < kBlockN / 64; ++j) tma_load(b + j * kBoxBytes, &p.b_map[g], full(stage), n0 + 64 * j, k0);
        }
        if (++stage == kStages) stage = 0, phase ^= 1;
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const int half = warpgroup - 1;  // rows [64·half, 64·half + 64) of each tile
  const bool leader = threadIdx.x % 128 == 0;  // issues the warpgroup's stores
  const uint32_t out_boxes = base + T::kOutOffset + half * T::kOutBoxes * kOutBoxBytes;
  int box = 0;
  int stage = 0;
  uint32_t phase = 0;
  uint32_t d_phase = 0;  // of d_loaded(half)
  float d[T::kAccumulators];
  // Split accumulation: a stage's products, added into d once complete. (Two in turn, the next
  // stage's running while the last's are added, took more registers than a thread has.)
  float part[T::kSplit ? T::kAccumulators : 1];
  // The multiplications of the stage at `stage` into acc (split: acc = the stage's products).
  const auto issue = [&](float(&acc)[T::kAccumulators]) {
    barrier_wait(full(stage), phase);
    const uint32_t a = base + stage * T::kStageBytes + half * kBoxBytes;
    const uint32_t b = base + stage * T::kStageBytes + T::kTileABytes;
    fence_accumulators(acc);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < kBlockK / T::kStepK; ++kk) {
      // A K-major row holds the block's 128 bytes of k: the next step's start 32 bytes on. A
      // transposed (bf16) operand holds 64 of M or N per 128-byte row: the next 16 k start 16 rows
      // on.
      const uint64_t da = T::kTransA ? smem_descriptor(a + kk * 2048, kBoxBytes, 1024)
                                     : smem_descriptor(a + kk * 32, 16, 1024);
      const uint64_t db = T::kTransB ? smem_descriptor(b + kk * 2048, kBoxBytes, 1024)
                                     : smem_descriptor(b + kk * 32, 16, 1024);
      wgmma_step<T>(acc, da, db, T::kSplit ? kk > 0 : 1);
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  };
  // The products in acc complete: the stage `held` they read released, and acc added into d.
  const auto retire = [&](float(&acc)[T::kAccumulators], int held) {
    fence_accumulators(acc);
    barrier_arrive(empty(held));
#pragma unroll
    for (int i = 0; i < T::kAccumulators; ++i) d[i] += acc[i];
  };
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int g = group_of_tile(p, tile);
    const int local = tile - p.tile_start[g];
    const int m0 = local % p.m_tiles[g] * kBlockM, n0 = local / p.m_tiles[g] * kBlockN;
    const int k_blocks = (p.k[g] + kBlockK - 1) / kBlockK;
#pragma unroll
    for (int i = 0; i < T::kAccumulators; ++i) d[i] = 0.0f;
    int held = -1;  // the stage whose multiplications may still be reading it
    for (int kb = 0; kb < k_blocks; ++kb) {
      if constexpr (T::kSplit) {
        // The other consumer's multiplications keep the tensor cores busy while these are added.
        issue(part);
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        retire(part, stage);
      } else {
        issue(d);
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
        fence_accumulators(d);
        if (held >= 0) barrier_arrive(empty(held));
        held = stage;
      }
      if (++stage == kStages) stage = 0, phase ^= 1;
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    fence_accumulators(d);
    if (held >= 0) barrier_arrive(empty(held));

    const float scale = T::kFp8 && k_blocks > 0 ? __ldg(p.a_scale[g]) * __ldg(p.b_scale[g]) : 1.0f;
    bool stored = false;
    if constexpr (T::kLoadsD) {
      if (p.d_f32 && p.accumulate) {
        // The last tile's stores have long read the boxes (a tile's products ran since).
        if (leader) {
          asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
          barrier_expect_bytes(d_loaded(half), T::kOutBoxes * kOutBoxBytes);
          for (int b = 0; b < T::kOutBoxes; ++b)
            tma_load(out_boxes + b * kOutBoxBytes, &p.d_map[g], d_loaded(half), n0 + 32 * b, m0 + 64 * half);
        }
        barrier_wait(d_loaded(half), d_phase);
        d_phase ^= 1;
        add_store_tile<T::kOutBoxes>(d, scale, &p.d_map[g], out_boxes, leader, half, n0, m0 + 64 * half);
        stored = true;
      }
    }
    if (stored) continue;
    if (p.d_f32)
      store_tile<4, T::kOutBoxes>(d, scale, &p.d_map[g], out_boxes, box, leader, half, n0, m0 + 64 * half,
                                  p.accumulate != 0);
    else
      store_tile<8, T::kOutBoxes>(d, scale, &p.d_map[g], out_boxes, box, leader, half, n0, m0 + 64 * half, false);
  }
  if (leader) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encoder = [] {
    void* address = nullptr;
    cudaDriverEntryPointQueryResult found{};
    PFN_cuTensorMapEncodeTiled_v12000 f = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &address, 12000, cudaEnableDefault, &found) ==
            cudaSuccess &&
        found == cudaDriverEntryPointSuccess)
      f = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(address);
    cudaGetLastError();
    return f;
  }();
  return encoder;
}

// A row-major matrix [rows, cols] of `element_bytes`-byte elements (2: bf16, 4: fp32, 1: FP8
// codes) moved in boxes of box_rows rows × 128 bytes, 128-byte swizzled.
bool encode_map(CUtensorMap* map, const void* data, int64_t rows, int64_t cols, int64_t ld, int box_rows,
                int element_bytes) {
  const CUtensorMapDataType type = element_bytes == 4   ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                   : element_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                        : CU_TENSOR_MAP_DATA_TYPE_UINT8;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * element_bytes};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(128 / element_bytes), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  return tensor_map_encoder()(map, type, 2, const_cast<void*>(data), dims, strides, box, element_strides,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// TMA's rules: a 16-byte aligned base, rows 16 bytes apart times some whole number.
bool aligned(const void* p, int64_t ld, int64_t row_length, int element_bytes) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && (ld * element_bytes) % 16 == 0 &&
         (row_length * element_bytes) % 16 == 0 && row_length <= ld;
}

template <class T>
void launch(const Params& p, int blocks, cudaStream_t stream) {
  static std::once_flag configured;
  std::call_once(configured, [] {
    MGT_CUDA_CHECK(
        cudaFuncSetAttribute(grouped_gemm_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes));
  });
  grouped_gemm_kernel<T><<<blocks, kThreads, T::kSmemBytes, stream>>>(p);
  MGT_CUDA_CHECK_LAUNCH(grouped_gemm_kernel);
}

int multiprocessors() {
  int device = 0, count = 0;
  MGT_CUDA_CHECK(cudaGetDevice(&device));
  MGT_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

// What a launch of tile T needs to know of the operands.
struct Layout {
  bool trans_a = false, trans_b = false;
  int operand_bytes = 2;  // 2: bf16, 1: FP8
  bool d_f32 = false;
  bool accumulate = false;
  bool fp8 = false;  // the groups' scale_inv factors taken
};

// The groups' tensor maps and tiles for tile T's launches, kMaxGroups groups each, then the
// launches; false, with nothing launched, where the operands do not suit the kernel.
template <class T>
bool plan_and_launch(const Layout& l, const GroupedGemmGroup* groups, std::size_t count, cudaStream_t stream) {
  const int d_bytes = l.d_f32 ? 4 : 2;
  for (std::size_t i = 0; i < count; ++i) {
    const GroupedGemmGroup& g = groups[i];
    if (g.m == 0 || g.n == 0) continue;
    if (g.k > 0 && (!aligned(g.a, g.a_ld, l.trans_a ? g.m : g.k, l.operand_bytes) ||
                    !aligned(g.b, g.b_ld, l.trans_b ? g.n : g.k, l.operand_bytes)))
      return false;
    if (l.fp8 && g.k > 0 && (g.a_scale_inv == nullptr || g.b_scale_inv == nullptr)) return false;
    if (!aligned(g.d, g.d_ld, g.n, d_bytes)) return false;
    if (g.m > (1 << 30) || g.n > (1 << 30) || g.k > (1 << 30)) return false;
  }
  // Every launch's tensor maps first: a map refused after a launch would leave part of the work done.
  std::vector<Params> launches;
  for (std::size_t first = 0; first < count; first += kMaxGroups) {
    Params& p = launches.emplace_back();
    std::memset(&p, 0, sizeof p);
    p.d_f32 = l.d_f32;
    p.accumulate = l.accumulate;
    int tiles = 0;
    for (std::size_t i = first; i < std::min(count, first + kMaxGroups); ++i) {
      const GroupedGemmGroup& g = groups[i];
      if (g.m == 0 || g.n == 0 || (g.k == 0 && l.accumulate)) continue;  // nothing to write
      const int slot = p.groups++;
      if (g.k > 0) {
        const int e = l.operand_bytes;
        const bool ok = (l.trans_a ? encode_map(&p.a_map[slot], g.a, g.k, g.m, g.a_ld, 64, e)
                                   : encode_map(&p.a_map[slot], g.a, g.m, g.k, g.a_ld, kBlockM, e)) &&
                        (l.trans_b ? encode_map(&p.b_map[slot], g.b, g.k, g.n, g.b_ld, 64, e)
                                   : encode_map(&p.b_map[slot], g.b, g.n, g.k, g.b_ld, T::kBlockN, e));
        if (!ok) return false;
        p.a_scale[slot] = g.a_scale_inv;
        p.b_scale[slot] = g.b_scale_inv;
      }
      if (!encode_map(&p.d_map[slot], g.d, g.m, g.n, g.d_ld, 64, d_bytes)) return false;
      p.m[slot] = static_cast<int>(g.m);
      p.n[slot] = static_cast<int>(g.n);
      p.k[slot] = static_cast<int>(g.k);
      p.m_tiles[slot] = static_cast<int>((g.m + kBlockM - 1) / kBlockM);
      p.tile_start[slot] = tiles;
      tiles += p.m_tiles[slot] * static_cast<int>((g.n + T::kBlockN - 1) / T::kBlockN);
    }
    p.tile_start[p.groups] = tiles;
  }
  // Each tile's whole k runs on one multiprocessor. Few tiles of a long k (a weight gradient
  // over many rows into a small weight) would leave most of the GPU idle while each runs, where
  // cuBLAS splits k: left to it when the longest tile would take over 4/3 of an even share.
  const int sms = multiprocessors();
  for (const Params& p : launches) {
    long long k_blocks = 0, longest = 0;
    for (int g = 0; g < p.groups; ++g) {
      const long long blocks = (p.k[g] + T::kBlockK - 1) / T::kBlockK;
      k_blocks += blocks * (p.tile_start[g + 1] - p.tile_start[g]);
      longest = std::max(longest, blocks);
    }
    if (longest >= 64 && 4 * k_blocks < 3 * longest * sms) return false;
  }
  for (const Params& p : launches) {
    const int tiles = p.tile_start[p.groups];
    if (tiles > 0) launch<T>(p, std::min(tiles, sms), stream);
  }
  return true;
}

}  // namespace

bool grouped_gemm_hopper_available() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return cudaGetLastError(), false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  return major == 9 && minor == 0 && tensor_map_encoder() != nullptr;
}

bool grouped_gemm_hopper(const GroupedGemmShape& shape, const GroupedGemmGroup* groups,
                         std::size_t count, FloatType operand_type, cudaStream_t stream) {
  // bf16 D plus an fp32 product would round twice through TMA's bf16 reduction: left to cuBLAS.
  if (operand_type != FloatType::kBf16 || !(shape.d_type == FloatType::kBf16 || shape.d_type == FloatType::kF32) ||
      (shape.accumulate && shape.d_type != FloatType::kF32))
    return false;
  if (!grouped_gemm_hopper_available()) return false;
  Layout l;
  l.trans_a = shape.a_major == OperandMajor::kMN;
  l.trans_b = shape.b_major == OperandMajor::kMN;
  l.d_f32 = shape.d_type == FloatType::kF32;
  l.accumulate = shape.accumulate;
  if (!l.trans_a && !l.trans_b) return plan_and_launch<Tile<0, 0, kOperandBf16, false>>(l, groups, count, stream);
  if (!l.trans_a) return plan_and_launch<Tile<0, 1, kOperandBf16, false>>(l, groups, count, stream);
  if (l.trans_b) return plan_and_launch<Tile<1, 1, kOperandBf16, false>>(l, groups, count, stream);
  return false;  // A transposed, B not: no caller needs it, not instantiated
}

bool grouped_gemm_hopper_fp8(const GroupedFp8GemmShape& shape, const GroupedGemmGroup* groups, std::size_t count,
                             cudaStream_t stream) {
  if (!(shape.d_type == FloatType::kBf16 || shape.d_type == FloatType::kF32) ||
      (shape.accumulate && shape.d_type != FloatType::kF32) || (shape.fast_accumulation && shape.a_e5m2))
    return false;
  if (!grouped_gemm_hopper_available()) return false;
  Layout l;
  l.operand_bytes = 1;
  l.d_f32 = shape.d_type == FloatType::kF32;
  l.accumulate = shape.accumulate;
  l.fp8 = true;
  using Fast = Tile<0, 0, kOperandE4M3, false>;
  using SplitE4M3 = Tile<0, 0, kOperandE4M3, true>;
  using SplitE5M2 = Tile<0, 0, kOperandE5M2, true>;
  if (shape.fast_accumulation) return plan_and_launch<Fast>(l, groups, count, stream);
  if (!shape.a_e5m2) return plan_and_launch<SplitE4M3>(l, groups, count, stream);
  return plan_and_launch<SplitE5M2>(l, groups, count, stream);
}

}  // namespace mgt::cuda
