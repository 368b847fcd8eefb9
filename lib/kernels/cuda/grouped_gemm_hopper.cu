// The grouped GEMM of grouped_gemm_hopper.hpp: a persistent, warp-specialized kernel on Hopper's
// asynchronous tensor-core instructions. Compiled for sm_90a only (wgmma, setmaxnreg); the
// library's other kernels stay sm_90.
//
// Each block holds one multiprocessor: a producer warp loads 128×64 tiles of A and 256×64 tiles of
// B into a ring of four shared-memory stages with the tensor memory accelerator (TMA, each
// group's operands described by a tensor map, rows and columns past the group's end read as
// zeros), and two consumer warpgroups multiply them with wgmma (64×256 each, fp32 accumulators
// in registers). The blocks take the tiles of every group in turn. A finished tile leaves through
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

constexpr int kBlockM = 128, kBlockN = 256, kBlockK = 64, kStages = 4;
constexpr int kThreads = 384;  // the producer's warpgroup and two consumers
constexpr int kMaxGroups = 32;  // per launch; more groups take more launches
constexpr int kTileABytes = kBlockM * kBlockK * 2;
constexpr int kTileBBytes = kBlockN * kBlockK * 2;
constexpr int kStageBytes = kTileABytes + kTileBBytes;
// Each consumer writes its 64 rows of a tile through two 8 KB boxes of shared memory in turn (64
// rows of 128 bytes: 64 bf16 or 32 fp32 columns), each stored to D by TMA while the next is filled.
constexpr int kOutBoxBytes = 64 * 128;
// The stages at a 1,024-byte boundary (the 128-byte swizzle's period), the output boxes, then
// the barriers.
constexpr int kOutOffset = kStages * kStageBytes;
constexpr int kBarrierOffset = kOutOffset + 2 * 2 * kOutBoxBytes;
constexpr int kSmemBytes = kBarrierOffset + 2 * kStages * 8 + 1024;

struct Params {
  CUtensorMap a_map[kMaxGroups];
  CUtensorMap b_map[kMaxGroups];
  CUtensorMap d_map[kMaxGroups];
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

// d (64×256 fp32, this warpgroup's fragment) += A·Bᵀ for a 64×16 A and a 256×16 B.
template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_64x256(float (&d)[128], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
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

// Keeps the compiler from moving accumulator reads or writes across the asynchronous wgmma.
__device__ __forceinline__ void fence_accumulators(float (&d)[128]) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

__device__ __forceinline__ int group_of_tile(const Params& p, int tile) {
  int g = 0;
  while (tile >= p.tile_start[g + 1]) ++g;
  return g;
}

// A consumer warpgroup's 64 rows of a tile from its accumulators d to D at (col0, row0), through
// its two output boxes in turn (`box` counts them). The fragment: register 4j + 2i + e holds row
// 16·warp + lane/4 + 8i, column 8j + 2·(lane%4) + e. A box takes kJPerBox of the 32 j: 64 bf16 (8)
// or 32 fp32 (4) columns. Within a box's row, 16-byte chunk q lies at q ^ (row % 8) (the 128-byte
// swizzle), so that a warp's eight rows write eight different chunks. Before a box is refilled,
// the store that read it two boxes ago has finished reading.
template <int kJPerBox>
__device__ __forceinline__ void store_tile(const float (&d)[128], const CUtensorMap* map, uint32_t out_boxes,
                                           int& box, bool leader, int half, int col0, int row0, bool add) {
  const int lane = threadIdx.x % 32, warp = (threadIdx.x % 128) / 32;
#pragma unroll
  for (int j0 = 0; j0 < 32; j0 += kJPerBox, ++box) {
    const uint32_t out = out_boxes + (box & 1) * kOutBoxBytes;
    if (leader) asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
    warpgroup_sync(half);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = 16 * warp + lane / 4 + 8 * i;
#pragma unroll
      for (int jj = 0; jj < kJPerBox; ++jj) {
        const float v0 = d[4 * (j0 + jj) + 2 * i], v1 = d[4 * (j0 + jj) + 2 * i + 1];
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
#endif

template <int kTransA, int kTransB>
__global__ void __launch_bounds__(kThreads, 1) grouped_gemm_kernel(const __grid_constant__ Params p) {
#ifdef MGT_SM90A_KERNEL
  extern __shared__ uint8_t smem[];
  const uint32_t base = (shared_address(smem) + 1023) & ~1023u;
  const uint32_t bars = base + kBarrierOffset;
  const auto full = [&](int s) { return bars + 8 * s; };
  const auto empty = [&](int s) { return bars + 8 * (kStages + s); };
  const int warpgroup = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      barrier_init(full(s), 1);
      barrier_init(empty(s), 256);
    }
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
        barrier_expect_bytes(full(stage), kStageBytes);
        const uint32_t a = base + stage * kStageBytes, b = a + kTileABytes;
        const int k0 = kb * kBlockK;
        if (kTransA == 0) {
          tma_load(a, &p.a_map[g], full(stage), k0, m0);
        } else {
          for (int j = 0; j < kBlockM / 64; ++j) tma_load(a + j * kBoxBytes, &p.a_map[g], full(stage), m0 + 64 * j, k0);
        }
        if (kTransB == 0) {
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
  const uint32_t out_boxes = base + kOutOffset + half * 2 * kOutBoxBytes;
  int box = 0;
  int stage = 0;
  uint32_t phase = 0;
  float d[128];
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int g = group_of_tile(p, tile);
    const int local = tile - p.tile_start[g];
    const int m0 = local % p.m_tiles[g] * kBlockM, n0 = local / p.m_tiles[g] * kBlockN;
    const int k_blocks = (p.k[g] + kBlockK - 1) / kBlockK;
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
    int held = -1;  // the stage whose multiplications may still be reading it
    for (int kb = 0; kb < k_blocks; ++kb) {
      barrier_wait(full(stage), phase);
      const uint32_t a = base + stage * kStageBytes + half * kBoxBytes, b = base + stage * kStageBytes + kTileABytes;
      fence_accumulators(d);
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int kk = 0; kk < kBlockK / 16; ++kk) {
        // A K-major row holds the block's 64 k (128 bytes): the next 16 start 32 bytes on. A
        // transposed operand holds 64 of M or N per 128-byte row: the next 16 k start 16 rows on.
        const uint64_t da = kTransA ? smem_descriptor(a + kk * 2048, kBoxBytes, 1024)
                                    : smem_descriptor(a + kk * 32, 16, 1024);
        const uint64_t db = kTransB ? smem_descriptor(b + kk * 2048, kBoxBytes, 1024)
                                    : smem_descriptor(b + kk * 32, 16, 1024);
        wgmma_64x256<kTransA, kTransB>(d, da, db);
      }
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
      fence_accumulators(d);
      if (held >= 0) barrier_arrive(empty(held));
      held = stage;
      if (++stage == kStages) stage = 0, phase ^= 1;
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    fence_accumulators(d);
    if (held >= 0) barrier_arrive(empty(held));

    if (p.d_f32)
      store_tile<4>(d, &p.d_map[g], out_boxes, box, leader, half, n0, m0 + 64 * half, p.accumulate != 0);
    else
      store_tile<8>(d, &p.d_map[g], out_boxes, box, leader, half, n0, m0 + 64 * half, false);
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

// A row-major matrix [rows, cols] of bf16 (or fp32) moved in boxes of box_rows rows × 128 bytes,
// 128-byte swizzled.
bool encode_map(CUtensorMap* map, const void* data, int64_t rows, int64_t cols, int64_t ld, int box_rows,
                bool f32 = false) {
  const int element_bytes = f32 ? 4 : 2;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * element_bytes};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(128 / element_bytes), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  return tensor_map_encoder()(map, f32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                              const_cast<void*>(data), dims, strides, box, element_strides,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// TMA's rules: a 16-byte aligned base, rows 16 bytes apart times some whole number.
bool aligned(const void* p, int64_t ld, int64_t row_length, int element_bytes = 2) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && (ld * element_bytes) % 16 == 0 &&
         (row_length * element_bytes) % 16 == 0 && row_length <= ld;
}

template <int kTransA, int kTransB>
void launch(const Params& p, int blocks, cudaStream_t stream) {
  static std::once_flag configured;
  std::call_once(configured, [] {
    MGT_CUDA_CHECK(cudaFuncSetAttribute(grouped_gemm_kernel<kTransA, kTransB>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  });
  grouped_gemm_kernel<kTransA, kTransB><<<blocks, kThreads, kSmemBytes, stream>>>(p);
  MGT_CUDA_CHECK_LAUNCH(grouped_gemm_kernel);
}

int multiprocessors() {
  int device = 0, count = 0;
  MGT_CUDA_CHECK(cudaGetDevice(&device));
  MGT_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
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
  const bool d_f32 = shape.d_type == FloatType::kF32;
  if (!grouped_gemm_hopper_available()) return false;
  const bool trans_a = shape.a_major == OperandMajor::kMN, trans_b = shape.b_major == OperandMajor::kMN;
  if (trans_a && !trans_b) return false;  // no caller needs it: not instantiated
  for (std::size_t i = 0; i < count; ++i) {
    const GroupedGemmGroup& g = groups[i];
    if (g.m == 0 || g.n == 0) continue;
    if (g.k > 0 && (!aligned(g.a, g.a_ld, trans_a ? g.m : g.k) || !aligned(g.b, g.b_ld, trans_b ? g.n : g.k)))
      return false;
    if (!aligned(g.d, g.d_ld, g.n, d_f32 ? 4 : 2)) return false;
    if (g.m > (1 << 30) || g.n > (1 << 30) || g.k > (1 << 30)) return false;
  }
  // Every launch's tensor maps first: a map refused after a launch would leave part of the work done.
  std::vector<Params> launches;
  for (std::size_t first = 0; first < count; first += kMaxGroups) {
    Params& p = launches.emplace_back();
    std::memset(&p, 0, sizeof p);
    p.d_f32 = d_f32;
    p.accumulate = shape.accumulate;
    int tiles = 0;
    for (std::size_t i = first; i < std::min(count, first + kMaxGroups); ++i) {
      const GroupedGemmGroup& g = groups[i];
      if (g.m == 0 || g.n == 0 || (g.k == 0 && shape.accumulate)) continue;  // nothing to write
      const int slot = p.groups++;
      if (g.k > 0) {
        const bool ok = (trans_a ? encode_map(&p.a_map[slot], g.a, g.k, g.m, g.a_ld, 64)
                                 : encode_map(&p.a_map[slot], g.a, g.m, g.k, g.a_ld, kBlockM)) &&
                        (trans_b ? encode_map(&p.b_map[slot], g.b, g.k, g.n, g.b_ld, 64)
                                 : encode_map(&p.b_map[slot], g.b, g.n, g.k, g.b_ld, kBlockN));
        if (!ok) return false;
      }
      if (!encode_map(&p.d_map[slot], g.d, g.m, g.n, g.d_ld, 64, d_f32)) return false;
      p.m[slot] = static_cast<int>(g.m);
      p.n[slot] = static_cast<int>(g.n);
      p.k[slot] = static_cast<int>(g.k);
      p.m_tiles[slot] = static_cast<int>((g.m + kBlockM - 1) / kBlockM);
      p.tile_start[slot] = tiles;
      tiles += p.m_tiles[slot] * static_cast<int>((g.n + kBlockN - 1) / kBlockN);
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
      const long long blocks = (p.k[g] + kBlockK - 1) / kBlockK;
      k_blocks += blocks * (p.tile_start[g + 1] - p.tile_start[g]);
      longest = std::max(longest, blocks);
    }
    if (longest >= 64 && 4 * k_blocks < 3 * longest * sms) return false;
  }
  for (const Params& p : launches) {
    const int tiles = p.tile_start[p.groups];
    if (tiles == 0) continue;
    const int blocks = std::min(tiles, sms);
    if (!trans_a && !trans_b) launch<0, 0>(p, blocks, stream);
    else if (!trans_a) launch<0, 1>(p, blocks, stream);
    else launch<1, 1>(p, blocks, stream);
  }
  return true;
}

}  // namespace mgt::cuda
