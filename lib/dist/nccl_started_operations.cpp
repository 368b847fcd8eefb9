// The started operations of the NCCL communicator (nccl_device_communicator.hpp): on the side
// stream, so that they run beside the compute. A started operation on this device's memory, on a
// stream-ordered communicator, waits on the side stream for what stream_ had queued when it
// started, runs there while stream_ goes on with the backward (or forward), and at wait()
// stream_ waits for it on the device: no host synchronisation either way. NCCL runs one
// communicator's kernels in the order they were issued whatever their streams, so the ranks'
// common order of operations still holds. Anything else (host memory, an unordered
// communicator) runs as the blocking form.
#include <utility>

#include "dist/nccl_check.hpp"
#include "dist/nccl_device_communicator.hpp"
#include "kernels/cuda_check.hpp"

namespace mgt::dist {

class NcclCommunicator::SidePending final : public PendingTransfer {
public:
  SidePending(NcclCommunicator& owner, std::uint64_t serial, InFlightOperation op)
      : owner_(&owner), serial_(serial), op_(op) {}
  ~SidePending() override {
    if (!waited_) owner_->end_started(serial_, op_, /*report=*/false);
  }
  void wait() override {
    waited_ = true;
    owner_->end_started(serial_, op_, /*report=*/true);
  }

private:
  NcclCommunicator* owner_;
  std::uint64_t serial_;
  InFlightOperation op_;
  bool waited_ = false;
};

// Made on first use with the highest priority: a collective's few blocks are scheduled ahead of
// the compute kernels' waiting ones, so the transfer keeps moving.
cudaStream_t NcclCommunicator::side_stream() {
  if (!side_stream_) {
    int least = 0, greatest = 0;
    MGT_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    MGT_CUDA_CHECK(cudaStreamCreateWithPriority(&side_stream_, cudaStreamNonBlocking, greatest));
  }
  return side_stream_;
}

cudaStream_t NcclCommunicator::begin_started() {
  use_device();
  cudaStream_t side = side_stream();
  cudaEvent_t ready = ready_events_.take();
  MGT_CUDA_CHECK(cudaEventRecord(ready, stream_));
  MGT_CUDA_CHECK(cudaStreamWaitEvent(side, ready, 0));
  // Reusable at once: the wait captured the event's current state.
  ready_events_.give_back(ready);
  timing_.begin_started(side);
  return side;
}

std::unique_ptr<PendingTransfer> NcclCommunicator::finish_started(const InFlightOperation& op) {
  check_async_error(op.operation);
  timing_.end_started(op.operation, side_stream_);
  return std::make_unique<SidePending>(*this, timing_.last_started(), op);
}

void NcclCommunicator::end_started(std::uint64_t serial, const InFlightOperation& op, bool report) {
  try {
    use_device();
    timing_.waited_for(serial, stream_);
    if (comm_) queued(op);
  } catch (...) {
    if (report) throw;
  }
}

std::unique_ptr<PendingTransfer> NcclCommunicator::do_start_all_reduce(RecvBuffer data, ReduceOp op) {
  if (sums_on_peers(data, op)) return start_all_reduce_on_peers(data);
  if (!runs_beside(data)) {
    do_all_reduce(data, op);
    return nullptr;
  }
  cudaStream_t side = begin_started();
  MGT_NCCL_CHECK(
      ncclAllReduce(data.data, data.data, count_of(data.count), nccl_type(data.type), nccl_op(op), comm_, side));
  return finish_started(operation("all_reduce", data.count, data.type, reduce_op_name(op)));
}

std::unique_ptr<PendingTransfer> NcclCommunicator::do_start_all_gather(SendBuffer send, RecvBuffer recv) {
  if (gathers_on_peers(send, recv)) return start_all_gather_on_peers(send, recv);
  if (!runs_beside(send) || !runs_beside(recv)) {
    do_all_gather(send, recv);
    return nullptr;
  }
  cudaStream_t side = begin_started();
  gather(send.data, recv.data, send, side);
  return finish_started(operation("all_gather", recv.count, recv.type));
}

std::unique_ptr<PendingTransfer> NcclCommunicator::do_start_all_to_all(SendBuffer send,
                                                                       std::span<const std::int64_t> send_counts,
                                                                       RecvBuffer recv,
                                                                       std::span<const std::int64_t> recv_counts) {
  if (!runs_beside(send) || !runs_beside(recv)) {
    do_all_to_all(send, send_counts, recv, recv_counts);
    return nullptr;
  }
  cudaStream_t side = begin_started();
  exchange(send.data, send_counts, recv.data, recv_counts, send.type, side);
  return finish_started(operation("all_to_all", recv.count, recv.type));
}

std::unique_ptr<PendingTransfer> NcclCommunicator::do_start_reduce_scatter(SendBuffer send, RecvBuffer recv,
                                                                           ReduceOp op) {
  if (scatters_on_peers(send, recv, op)) return start_reduce_scatter_on_peers(send, recv);
  if (!runs_beside(send) || !runs_beside(recv)) {
    do_reduce_scatter(send, recv, op);
    return nullptr;
  }
  cudaStream_t side = begin_started();
  scatter(send.data, recv.data, recv, op, side);
  return finish_started(operation("reduce_scatter", send.count, send.type, reduce_op_name(op)));
}

std::unique_ptr<PendingTransfer> NcclCommunicator::do_start_send_recv(SendBuffer send, int dest, RecvBuffer recv,
                                                                      int source) {
  if (!runs_beside(send) || !runs_beside(recv)) {
    do_send_recv(send, dest, recv, source);
    return nullptr;
  }
  cudaStream_t side = begin_started();
  MGT_NCCL_CHECK(ncclGroupStart());
  MGT_NCCL_CHECK(ncclSend(send.data, count_of(send.count), nccl_type(send.type), dest, comm_, side));
  MGT_NCCL_CHECK(ncclRecv(recv.data, count_of(recv.count), nccl_type(recv.type), source, comm_, side));
  MGT_NCCL_CHECK(ncclGroupEnd());
  return finish_started(operation("send_recv", recv.count, recv.type, nullptr, "from rank", source));
}

std::unique_ptr<PendingTransfer> NcclCommunicator::do_start_reduce_scatter_chunks(
    RecvBuffer data, std::span<const std::int64_t> counts, ReduceOp op) {
  if (sums_on_peers(data, op)) return start_reduce_scatter_chunks_on_peers(data, counts);
  if (!runs_beside(data)) {
    do_reduce_scatter_chunks(data, counts, op);
    return nullptr;
  }
  cudaStream_t side = begin_started();
  chunked(data, counts, "reduce_scatter", reduce_op_name(op), side,
          [&](void* chunk, std::size_t n, int root, cudaStream_t stream) {
    MGT_NCCL_CHECK(ncclReduce(chunk, chunk, n, nccl_type(data.type), nccl_op(op), root, comm_, stream));
  });
  return finish_started(operation("reduce_scatter", data.count, data.type, reduce_op_name(op)));
}

std::unique_ptr<PendingTransfer> NcclCommunicator::do_start_all_gather_chunks(RecvBuffer data,
                                                                              std::span<const std::int64_t> counts) {
  if (on_peers(data)) return start_all_gather_chunks_on_peers(data, counts);
  if (!runs_beside(data)) {
    do_all_gather_chunks(data, counts);
    return nullptr;
  }
  cudaStream_t side = begin_started();
  chunked(data, counts, "all_gather", nullptr, side, [&](void* chunk, std::size_t n, int root, cudaStream_t stream) {
    MGT_NCCL_CHECK(ncclBroadcast(chunk, chunk, n, nccl_type(data.type), root, comm_, stream));
  });
  return finish_started(operation("all_gather", data.count, data.type));
}

}  // namespace mgt::dist
