// The NCCL communicator behind make_nccl_communicator (nccl_communicator.hpp), private to the
// NCCL build. Its work is spread over files with one job each:
//   nccl_communicator.cpp        set-up, errors and waits, the operations queued on the caller's
//                                stream (or run on the communicator's own);
//   nccl_started_operations.cpp  the started forms, on a side stream beside the compute;
//   nccl_peer_routing.cpp        which operations go to the copy engines (nccl_peer_copy.hpp);
// with its parts: host buffers staged through device scratch (nccl_staging.hpp), the timing of
// its operations (nccl_operation_timing.hpp) and the watch of those left queued
// (nccl_queue_watch.hpp).
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>

#include "dist/communicator.hpp"
#include "dist/nccl_communicator.hpp"
#include "dist/nccl_event_pool.hpp"
#include "dist/nccl_operation_timing.hpp"
#include "dist/nccl_peer_copy.hpp"
#include "dist/nccl_queue_watch.hpp"
#include "dist/nccl_staging.hpp"

namespace mgt::dist {

ncclDataType_t nccl_type(ElementType type);
inline ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::Sum ? ncclSum : ncclMax; }
inline std::size_t count_of(std::int64_t count) { return static_cast<std::size_t>(count); }

class NcclCommunicator final : public Communicator {
public:
  // `stream` null: the communicator's own, every operation waited for.
  // `peer`: the copy-engine collectives over registered buffers (null: none).
  NcclCommunicator(GroupMembers members, CollectiveWatchdog* watchdog, int device, cudaStream_t stream,
                   const ncclUniqueId& id, std::unique_ptr<PeerCopyCollectives> peer);
  ~NcclCommunicator() override;

  const char* transport() const override { return "nccl"; }
  bool stream_ordered() const override { return ordered_; }
  std::optional<OverlapTiming> take_overlap_timing() override;

private:
  class SidePending;

  // ---- nccl_communicator.cpp: errors, waits, completion ----
  void use_device();
  InFlightOperation operation(const char* name, std::int64_t count, ElementType type, const char* reduce = nullptr,
                              const char* peer_role = nullptr, int peer = -1) const {
    return InFlightOperation{name, reduce, &description(), count, type, peer_role, peer};
  }
  // Waits for stream_ while watching for NCCL's asynchronous errors (a peer that failed), which
  // a plain cudaStreamSynchronize would never report.
  void wait(const char* operation);
  void check_async_error(const char* operation);
  // For the destructor: waits for one of the streams, giving up (and aborting NCCL, which frees
  // the stream) when NCCL reports a failed peer. Operations still watched end the job through
  // the watchdog if they never finish.
  void drain(cudaStream_t stream) noexcept;
  // Just before an operation's NCCL call on stream_: the start of its timing.
  void mark_begin();
  // The end of every operation: one that staged a buffer through the scratch (whose results are
  // copied back to the host) or runs on the communicator's own stream returns complete; one on
  // device buffers in the caller's stream stays queued there, watched (queued()).
  void complete(const InFlightOperation& op, bool staged);
  // An operation left queued on the caller's stream: a failure NCCL already knows of is reported
  // now, and the operation stays watched until it has run.
  void queued(const InFlightOperation& op);

  // ---- nccl_communicator.cpp: the operations, queued on stream_ ----
  void do_all_reduce(RecvBuffer data, ReduceOp op) override;
  void do_all_gather(SendBuffer send, RecvBuffer recv) override;
  void do_reduce_scatter(SendBuffer send, RecvBuffer recv, ReduceOp op) override;
  void do_reduce_scatter_chunks(RecvBuffer data, std::span<const std::int64_t> counts, ReduceOp op) override;
  void do_all_gather_chunks(RecvBuffer data, std::span<const std::int64_t> counts) override;
  void do_broadcast(RecvBuffer data, int root) override;
  void do_send(SendBuffer data, int dest) override;
  void do_recv(RecvBuffer data, int source) override;
  void do_send_recv(SendBuffer send, int dest, RecvBuffer recv, int source) override;
  void do_barrier() override;
  // One NCCL group of a send and a receive per peer (NCCL has no all-to-all of its own).
  void do_all_to_all(SendBuffer send, std::span<const std::int64_t> send_counts, RecvBuffer recv,
                     std::span<const std::int64_t> recv_counts) override;
  // That group on `stream` from device memory `in` into `out`.
  void exchange(const void* in, std::span<const std::int64_t> send_counts, void* out,
                std::span<const std::int64_t> recv_counts, ElementType type, cudaStream_t stream);
  void gather(const void* in, void* out, SendBuffer send, cudaStream_t stream);
  void scatter(const void* in, void* out, RecvBuffer recv, ReduceOp op, cudaStream_t stream);
  // The chunked collectives as one NCCL group of a reduce (all-gather: broadcast) per chunk,
  // rooted at the chunk's rank, in place: NCCL has no reduce-scatter of unequal chunks.
  // `stream`: stream_, or the side stream for a started operation on device memory (which needs
  // no staging, so nothing is queued on stream_).
  using PerChunk = std::function<void(void* chunk, std::size_t count, int root, cudaStream_t stream)>;
  void chunked(RecvBuffer data, std::span<const std::int64_t> counts, const char* name, const char* reduce,
               cudaStream_t stream, const PerChunk& per_chunk);

  // ---- nccl_started_operations.cpp: beside the compute ----
  bool runs_beside(SendBuffer data) const {
    return ordered_ && data.count > 0 && data.space == MemorySpace::Backend && staging_.on_device(data.data);
  }
  cudaStream_t side_stream();
  // Before a started operation: the side stream waits for stream_'s work so far.
  cudaStream_t begin_started();
  std::unique_ptr<PendingTransfer> finish_started(const InFlightOperation& op);
  // stream_ waits for the started operation; it stays watched until stream_ has passed that
  // point (queued()). Without `report` (a handle dropped while unwinding) errors are swallowed.
  void end_started(std::uint64_t serial, const InFlightOperation& op, bool report);
  std::unique_ptr<PendingTransfer> do_start_all_reduce(RecvBuffer data, ReduceOp op) override;
  std::unique_ptr<PendingTransfer> do_start_all_gather(SendBuffer send, RecvBuffer recv) override;
  std::unique_ptr<PendingTransfer> do_start_all_to_all(SendBuffer send, std::span<const std::int64_t> send_counts,
                                                       RecvBuffer recv,
                                                       std::span<const std::int64_t> recv_counts) override;
  std::unique_ptr<PendingTransfer> do_start_reduce_scatter(SendBuffer send, RecvBuffer recv, ReduceOp op) override;
  std::unique_ptr<PendingTransfer> do_start_send_recv(SendBuffer send, int dest, RecvBuffer recv,
                                                      int source) override;
  std::unique_ptr<PendingTransfer> do_start_reduce_scatter_chunks(RecvBuffer data, std::span<const std::int64_t> counts,
                                                                  ReduceOp op) override;
  std::unique_ptr<PendingTransfer> do_start_all_gather_chunks(RecvBuffer data,
                                                              std::span<const std::int64_t> counts) override;

  // ---- nccl_peer_routing.cpp: the copy engines' collectives over registered buffers ----
  bool on_peers(SendBuffer data) const;
  bool sums_on_peers(SendBuffer data, ReduceOp op) const;
  bool gathers_on_peers(SendBuffer send, RecvBuffer recv) const { return on_peers(recv) && runs_beside(send); }
  bool scatters_on_peers(SendBuffer send, RecvBuffer recv, ReduceOp op) const {
    return sums_on_peers(send, op) && runs_beside(recv);
  }
  std::unique_ptr<PendingTransfer> start_on_peers(const InFlightOperation& op,
                                                  const std::function<void(cudaStream_t side)>& run);
  std::unique_ptr<PendingTransfer> start_all_reduce_on_peers(RecvBuffer data);
  std::unique_ptr<PendingTransfer> start_reduce_scatter_chunks_on_peers(RecvBuffer data,
                                                                        std::span<const std::int64_t> counts);
  std::unique_ptr<PendingTransfer> start_all_gather_on_peers(SendBuffer send, RecvBuffer recv);
  std::unique_ptr<PendingTransfer> start_reduce_scatter_on_peers(SendBuffer send, RecvBuffer recv);
  std::unique_ptr<PendingTransfer> start_all_gather_chunks_on_peers(RecvBuffer data,
                                                                    std::span<const std::int64_t> counts);
  std::unique_ptr<PendingTransfer> do_start_swap(SendBuffer send, RecvBuffer recv) override;
  bool do_register_buffer(RecvBuffer data) override;
  void do_unregister_buffer(RecvBuffer data) override;

  int device_;
  bool ordered_;                        // operations on device buffers stay queued on stream_
  cudaStream_t own_stream_ = nullptr;
  cudaStream_t stream_ = nullptr;       // the caller's, or own_stream_
  cudaStream_t side_stream_ = nullptr;  // started operations (made on first use)
  ncclComm_t comm_ = nullptr;
  std::unique_ptr<PeerCopyCollectives> peer_;  // over registered buffers; null: none
  NcclStaging staging_;
  NcclOperationTiming timing_;
  NcclQueueWatch watch_;
  CudaEventPool ready_events_{cudaEventDisableTiming};  // begin_started()'s hand-over to the side stream
};

}  // namespace mgt::dist
