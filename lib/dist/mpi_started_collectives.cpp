// MpiCommunicator's started collectives: MPI_Iallreduce and MPI_Iallgatherv, and the rank-order
// reduce-scatter (mpi_rank_order_reduce_scatter.hpp), on the buffer itself (host memory) or on a
// host staging copy that the wait writes back. MPICH sums each element of a part's all-reduce as
// it sums the element in the whole buffer's (recursive doubling and Rabenseifner's algorithm
// pair the ranks alike), and the rank-order reduce-scatter sums alike by construction, so a
// buffer reduced bucket by bucket equals the buffer reduced at once, bit for bit
// (tests/dist/test_started_collectives.cpp).
#include <algorithm>
#include <cstring>
#include <utility>

#include "core/error.hpp"
#include "dist/host_staging.hpp"
#include "dist/mpi_check.hpp"
#include "dist/mpi_communicator.hpp"
#include "dist/mpi_rank_order_reduce_scatter.hpp"
#include "dist/mpi_reduce_types.hpp"
#include "dist/mpi_wait.hpp"

namespace mgt::dist {
namespace {

// One MPI request, and what must live until it completes: the staged buffer MPI works on (the
// caller's own for host memory) and the counts MPI reads.
class MpiTransfer final : public PendingTransfer {
public:
  explicit MpiTransfer(HostStaging staging) : staging_(std::move(staging)) {}
  ~MpiTransfer() override {
    // Never left in flight over freed memory (PendingCollective waits before dropping).
    if (request_ != MPI_REQUEST_NULL) mpi_wait(&request_, MPI_STATUS_IGNORE);
  }
  void* staged() const { return staging_.host(); }
  MPI_Request* request() { return &request_; }
  std::vector<int>& counts() { return counts_; }
  std::vector<int>& displacements() { return displacements_; }

  void wait() override {
    MGT_MPI_CHECK(mpi_wait(&request_, MPI_STATUS_IGNORE));
    staging_.store();
  }

private:
  HostStaging staging_;
  std::vector<int> counts_;
  std::vector<int> displacements_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

// A chunked reduce-scatter (mpi_rank_order_reduce_scatter.hpp), in place: this rank's reduced
// chunk is written over its chunk of the staged buffer, which the wait stores back.
class ChunkReduction final : public PendingTransfer {
public:
  ChunkReduction(HostStaging staging, MPI_Comm comm, int rank, std::span<const std::int64_t> counts, ElementType type,
                 ReduceOp op)
      : staging_(std::move(staging)), exchange_(comm, rank, staging_.host(), counts, type, op) {
    std::int64_t before = 0;
    for (int r = 0; r < rank; ++r) before += counts[static_cast<std::size_t>(r)];
    own_offset_ = static_cast<std::size_t>(before) * element_size(type);
  }
  void wait() override {
    exchange_.finish(static_cast<std::byte*>(staging_.host()) + own_offset_);
    staging_.store();
  }

private:
  HostStaging staging_;  // first: the exchange reads it
  RankOrderReduceScatter exchange_;
  std::size_t own_offset_ = 0;
};

}  // namespace

void MpiCommunicator::chunk_layout(const char* operation, std::span<const std::int64_t> counts,
                                   std::vector<int>& mpi_counts, std::vector<int>& displacements) const {
  mpi_counts.clear();
  displacements.clear();
  std::int64_t offset = 0;
  for (const std::int64_t c : counts) {
    mpi_counts.push_back(mpi_count(operation, c));
    displacements.push_back(mpi_count(operation, offset));
    offset += c;
  }
}

std::unique_ptr<PendingTransfer> MpiCommunicator::do_start_all_reduce(RecvBuffer data, ReduceOp op) {
  const int count = mpi_count("all_reduce", data.count);
  if (size() == 1 || count == 0) return nullptr;
  auto transfer = std::make_unique<MpiTransfer>(HostStaging(mover_, data, true));
  MGT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, transfer->staged(), count, mpi_type(data.type),
                               mpi_op(op, data.type), comm_, transfer->request()));
  return transfer;
}

std::unique_ptr<PendingTransfer> MpiCommunicator::do_start_reduce_scatter_chunks(
    RecvBuffer data, std::span<const std::int64_t> counts, ReduceOp op) {
  if (size() == 1 || data.count == 0) return nullptr;
  for (const std::int64_t c : counts) mpi_count("reduce_scatter", c);
  return std::make_unique<ChunkReduction>(HostStaging(mover_, data, true), comm_, rank(), counts, data.type, op);
}

std::unique_ptr<PendingTransfer> MpiCommunicator::do_start_all_gather_chunks(
    RecvBuffer data, std::span<const std::int64_t> counts) {
  if (size() == 1 || data.count == 0) return nullptr;
  mpi_count("all_gather", data.count);
  auto transfer = std::make_unique<MpiTransfer>(HostStaging(mover_, data, true));
  chunk_layout("all_gather", counts, transfer->counts(), transfer->displacements());
  MGT_MPI_CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, transfer->staged(),
                                transfer->counts().data(), transfer->displacements().data(),
                                mpi_type(data.type), comm_, transfer->request()));
  return transfer;
}

void MpiCommunicator::do_reduce_scatter_chunks(RecvBuffer data, std::span<const std::int64_t> counts,
                                               ReduceOp op) {
  if (auto transfer = do_start_reduce_scatter_chunks(data, counts, op)) transfer->wait();
}

void MpiCommunicator::do_all_gather_chunks(RecvBuffer data, std::span<const std::int64_t> counts) {
  if (auto transfer = do_start_all_gather_chunks(data, counts)) transfer->wait();
}

}  // namespace mgt::dist
