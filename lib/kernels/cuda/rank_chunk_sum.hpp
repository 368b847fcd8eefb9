// The local half of a reduce-scatter whose data moved without kernels (an all-to-all on the copy
// engines, dist/nccl_symmetric_staging.hpp): each rank holds every rank's chunk for its own part
// and sums them.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mgt::cuda {

enum class ChunkType { kF32, kBf16, kF16 };

// out[i] = Σ_r chunks[r·count + i], r = 0 … ranks−1 in that order, accumulated in fp32 and
// rounded once to the element type.
void sum_rank_chunks(const void* chunks, int ranks, int64_t count, ChunkType type, void* out, cudaStream_t stream);

// The same over pieces anywhere in this device's memory (the copy-engine reduction of
// dist/nccl_peer_copy.hpp: this rank's own piece in place, the peers' copied to a scratch):
// out[i] = Σ_r piece[r][i], r = 0 … ranks−1 in that order, in fp32, rounded once. `out` may be
// one of the pieces.
constexpr int kMaxRankPieces = 8;
struct RankPieces {
  const void* piece[kMaxRankPieces] = {};
};
void sum_rank_pieces(const RankPieces& pieces, int ranks, int64_t count, ChunkType type, void* out,
                     cudaStream_t stream);

}  // namespace mgt::cuda
