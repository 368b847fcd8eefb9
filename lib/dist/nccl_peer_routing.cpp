// Which of the NCCL communicator's operations run on the copy engines (nccl_peer_copy.hpp):
// collectives over registered buffers, where the ranks share a machine. They are started like
// the others, on the side stream: every one of them must run on one stream. Every rank routes
// alike: the buffers were registered on all of them, at the same sizes.
#include <vector>

#include "dist/nccl_device_communicator.hpp"
#include "kernels/cuda_check.hpp"

namespace mgt::dist {

bool NcclCommunicator::on_peers(SendBuffer data) const {
  return peer_ && ordered_ && data.count > 0 && data.space == MemorySpace::Backend &&
         peer_->covers(data.data, data.bytes());
}

// Reductions started alone (Communicator::set_alone) go to NCCL's kernels, faster with nothing
// computing beside them.
bool NcclCommunicator::sums_on_peers(SendBuffer data, ReduceOp op) const {
  return op == ReduceOp::Sum && PeerCopyCollectives::sums(data.type) && on_peers(data) && !alone();
}

std::unique_ptr<PendingTransfer> NcclCommunicator::start_on_peers(const InFlightOperation& op,
                                                                  const std::function<void(cudaStream_t side)>& run) {
  cudaStream_t side = begin_started();
  run(side);
  return finish_started(op);
}

std::unique_ptr<PendingTransfer> NcclCommunicator::start_all_reduce_on_peers(RecvBuffer data) {
  return start_on_peers(operation("all_reduce", data.count, data.type, "sum"), [&](cudaStream_t side) {
    peer_->all_reduce_sum(data.data, data.count, data.type, side);
  });
}

std::unique_ptr<PendingTransfer> NcclCommunicator::start_reduce_scatter_chunks_on_peers(
    RecvBuffer data, std::span<const std::int64_t> counts) {
  return start_on_peers(operation("reduce_scatter", data.count, data.type, "sum"), [&](cudaStream_t side) {
    peer_->reduce_scatter_chunks_sum(data.data, counts, data.type, side);
  });
}

// An all-gather into a registered buffer from this device's memory (the receive buffer's part,
// or any other place).
std::unique_ptr<PendingTransfer> NcclCommunicator::start_all_gather_on_peers(SendBuffer send, RecvBuffer recv) {
  return start_on_peers(operation("all_gather", recv.count, recv.type), [&](cudaStream_t side) {
    void* own = static_cast<std::byte*>(recv.data) + rank() * send.bytes();
    if (own != send.data)
      MGT_CUDA_CHECK(cudaMemcpyAsync(own, send.data, send.bytes(), cudaMemcpyDeviceToDevice, side));
    const std::vector<std::int64_t> counts(static_cast<std::size_t>(size()), send.count);
    peer_->all_gather_chunks(recv.data, counts, recv.type, side);
  });
}

// A reduce-scatter from a registered buffer into this device's memory.
std::unique_ptr<PendingTransfer> NcclCommunicator::start_reduce_scatter_on_peers(SendBuffer send, RecvBuffer recv) {
  return start_on_peers(operation("reduce_scatter", send.count, send.type, "sum"), [&](cudaStream_t side) {
    peer_->reduce_scatter_sum(send.data, recv.count, send.type, recv.data, side);
  });
}

std::unique_ptr<PendingTransfer> NcclCommunicator::start_all_gather_chunks_on_peers(
    RecvBuffer data, std::span<const std::int64_t> counts) {
  return start_on_peers(operation("all_gather", data.count, data.type), [&](cudaStream_t side) {
    peer_->all_gather_chunks(data.data, counts, data.type, side);
  });
}

std::unique_ptr<PendingTransfer> NcclCommunicator::do_start_swap(SendBuffer send, RecvBuffer recv) {
  if (!on_peers(send) || !on_peers(recv)) return do_start_send_recv(send, 1 - rank(), recv, 1 - rank());
  // Each rank's `send` lies where the other's `recv` does: each reads its part from the other.
  return start_on_peers(operation("send_recv", recv.count, recv.type, nullptr, "from rank", 1 - rank()),
                        [&](cudaStream_t side) { peer_->fetch(recv.data, recv.bytes(), 1 - rank(), side); });
}

void NcclCommunicator::do_unregister_buffer(RecvBuffer data) {
  if (!peer_) return;
  use_device();
  // Nothing may still read or write it, here or on a peer.
  if (ordered_) wait("unregister_buffer");
  if (side_stream_) MGT_CUDA_CHECK(cudaStreamSynchronize(side_stream_));
  peer_->unregister_buffer(data.data);
  // Every rank has unmapped the others' copies before any frees its own.
  do_barrier();
}

bool NcclCommunicator::do_register_buffer(RecvBuffer data) {
  if (!peer_) return false;  // alike on every rank (PeerCopyCollectives::create)
  use_device();
  const bool shareable =
      ordered_ && data.count > 0 && data.space == MemorySpace::Backend && staging_.on_device(data.data);
  return peer_->register_buffer(*this, shareable ? data.data : nullptr, data.bytes());
}

}  // namespace mgt::dist
