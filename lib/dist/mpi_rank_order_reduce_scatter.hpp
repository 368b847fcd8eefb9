// Internal to lib/dist (includes mpi.h): MpiCommunicator's reduce-scatter, its own rather than
// MPI's. MPICH chooses its reduce-scatter algorithm by message size (recursive halving below
// 512 KiB, pairwise exchange above, at 4 ranks and more), and the two sum each element in
// different orders; a gradient buffer reduced bucket by bucket (--overlap-grad-reduce) would then
// differ in the last bits from the same buffer reduced at once. Here each rank sends every other
// rank its chunk and sums the chunks it receives in rank order, ((x0 + x1) + x2) + …, whatever the
// sizes: the traffic of MPICH's pairwise exchange, and the same sums for any split of a buffer.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dist/comm_buffer.hpp"

namespace mgt::dist {

class RankOrderReduceScatter {
public:
  // Starts the exchange of `send` (host memory, chunked by `counts` over the ranks of `comm`,
  // which must stay untouched until finish()); `rank` is this process's rank in comm.
  RankOrderReduceScatter(MPI_Comm comm, int rank, const void* send, std::span<const std::int64_t> counts,
                         ElementType type, ReduceOp op);
  RankOrderReduceScatter(const RankOrderReduceScatter&) = delete;
  RankOrderReduceScatter& operator=(const RankOrderReduceScatter&) = delete;
  ~RankOrderReduceScatter();

  // Waits for the exchange and writes this rank's reduced chunk (counts[rank] elements) to `out`
  // (host memory; it may be this rank's chunk of `send`).
  void finish(void* out);

private:
  ElementType type_;
  ReduceOp op_;
  int rank_;
  int ranks_;
  std::int64_t mine_ = 0;               // elements of this rank's chunk
  const std::byte* own_ = nullptr;      // this rank's chunk of `send`
  std::unique_ptr<std::byte[]> incoming_;  // [rank][mine_] the other ranks' chunks
  std::vector<MPI_Request> requests_;
};

}  // namespace mgt::dist
