// The communicator of a group of one process, without MPI or NCCL: a lone process started with
// no launcher runs every group through it. Collectives reduce to copies (or nothing), so the
// single-rank path costs nothing and can never wait on anyone.
#pragma once
#include <string>

#include "dist/communicator.hpp"
#include "dist/memory_mover.hpp"

namespace mgt::dist {

class LocalCommunicator final : public Communicator {
public:
  // `world_rank` is this process's rank in the world (0 for a lone process); `mover` (may be
  // null) copies between buffers in a device backend's memory.
  LocalCommunicator(std::string kind, int world_rank, MemoryMover* mover,
                    CollectiveWatchdog* watchdog);

  const char* transport() const override { return "local"; }

private:
  void do_all_reduce(RecvBuffer, ReduceOp) override {}
  void do_all_gather(SendBuffer send, RecvBuffer recv) override { copy(send, recv); }
  void do_reduce_scatter(SendBuffer send, RecvBuffer recv, ReduceOp) override { copy(send, recv); }
  void do_broadcast(RecvBuffer, int) override {}
  // Unreachable: the checks refuse a peer equal to this rank, the only one there is.
  void do_send(SendBuffer, int) override { no_peer("send"); }
  void do_recv(RecvBuffer, int) override { no_peer("recv"); }
  void do_send_recv(SendBuffer send, int, RecvBuffer recv, int) override;
  void do_barrier() override {}
  // One rank: its chunk is the whole buffer, already reduced and gathered.
  void do_reduce_scatter_chunks(RecvBuffer, std::span<const std::int64_t>, ReduceOp) override {}
  void do_all_gather_chunks(RecvBuffer, std::span<const std::int64_t>) override {}

  void copy(SendBuffer from, RecvBuffer to) const;
  [[noreturn]] void no_peer(const char* operation) const;

  MemoryMover* mover_;
};

}  // namespace mgt::dist
