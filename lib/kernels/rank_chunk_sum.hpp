// The local half of a reduction whose data moved without kernels (the copy engines' collectives
// of dist/nccl_peer_copy.hpp): this rank's own piece in place, the peers' copied to a scratch,
// summed in rank order.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace mgt::cuda {

enum class ChunkType { kF32, kBf16, kF16 };

// out[i] = Σ_r piece[r][i], r = 0 … ranks−1 in that order, accumulated in fp32 and rounded once
// to the element type. `out` may be one of the pieces.
constexpr int kMaxRankPieces = 8;
struct RankPieces {
  const void* piece[kMaxRankPieces] = {};
};
void sum_rank_pieces(const RankPieces& pieces, int ranks, int64_t count, ChunkType type, void* out,
                     cudaStream_t stream);

}  // namespace mgt::cuda
