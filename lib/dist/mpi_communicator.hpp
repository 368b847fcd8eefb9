// Internal to lib/dist (includes mpi.h): the communicator over an MPI communicator, on host
// memory. Buffers in a device backend's memory are staged through host memory by the
// MemoryMover it was given. Create it through DistributedRuntime::split.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dist/communicator.hpp"
#include "dist/memory_mover.hpp"

namespace mgt::dist {

class MpiCommunicator final : public Communicator {
public:
  // Takes ownership of `comm` (freed with the communicator); `mover` may be null.
  MpiCommunicator(MPI_Comm comm, GroupMembers members, MemoryMover* mover,
                  CollectiveWatchdog* watchdog);
  ~MpiCommunicator() override;

  const char* transport() const override { return "mpi"; }
  MPI_Comm handle() const { return comm_; }

private:
  void do_all_reduce(RecvBuffer data, ReduceOp op) override;
  void do_all_gather(SendBuffer send, RecvBuffer recv) override;
  void do_reduce_scatter(SendBuffer send, RecvBuffer recv, ReduceOp op) override;
  void do_broadcast(RecvBuffer data, int root) override;
  void do_send(SendBuffer data, int dest) override;
  void do_recv(RecvBuffer data, int source) override;
  void do_send_recv(SendBuffer send, int dest, RecvBuffer recv, int source) override;
  void do_barrier() override;
  void do_all_to_all(SendBuffer send, std::span<const std::int64_t> send_counts, RecvBuffer recv,
                     std::span<const std::int64_t> recv_counts) override;
  void do_reduce_scatter_chunks(RecvBuffer data, std::span<const std::int64_t> counts,
                                ReduceOp op) override;
  void do_all_gather_chunks(RecvBuffer data, std::span<const std::int64_t> counts) override;
  // mpi_started_collectives.cpp: MPI's nonblocking collectives.
  std::unique_ptr<PendingTransfer> do_start_all_reduce(RecvBuffer data, ReduceOp op) override;
  std::unique_ptr<PendingTransfer> do_start_reduce_scatter_chunks(
      RecvBuffer data, std::span<const std::int64_t> counts, ReduceOp op) override;
  std::unique_ptr<PendingTransfer> do_start_all_gather_chunks(
      RecvBuffer data, std::span<const std::int64_t> counts) override;
  // MPI's int counts and displacements of the chunks.
  void chunk_layout(const char* operation, std::span<const std::int64_t> counts,
                    std::vector<int>& mpi_counts, std::vector<int>& displacements) const;

  int mpi_count(const char* operation, std::int64_t count) const;
  void check_received(const char* operation, const MPI_Status& status, RecvBuffer recv,
                      int source) const;

  MPI_Comm comm_;
  MemoryMover* mover_;
};

}  // namespace mgt::dist
