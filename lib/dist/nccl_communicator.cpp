#include "dist/nccl_communicator.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <thread>
#include <utility>

#include "core/error.hpp"
#include "dist/nccl_check.hpp"
#include "dist/nccl_device_communicator.hpp"
#include "dist/node_membership.hpp"
#include "kernels/cuda_check.hpp"

namespace mgt::dist {

ncclDataType_t nccl_type(ElementType type) {
  switch (type) {
    case ElementType::Float32: return ncclFloat32;
    case ElementType::Float64: return ncclFloat64;
    case ElementType::Int64: return ncclInt64;
    case ElementType::BFloat16: return ncclBfloat16;
    case ElementType::Float16: return ncclFloat16;
    case ElementType::UInt8: return ncclUint8;
  }
  return ncclFloat32;
}

NcclCommunicator::NcclCommunicator(GroupMembers members, CollectiveWatchdog* watchdog, int device,
                                   cudaStream_t stream, const ncclUniqueId& id,
                                   std::unique_ptr<PeerCopyCollectives> peer)
    : Communicator(std::move(members), watchdog),
      device_(device),
      ordered_(stream != nullptr),
      peer_(std::move(peer)),
      staging_(device, "NCCL " + description()),
      watch_(watchdog, device) {
  MGT_CUDA_CHECK(cudaSetDevice(device_));
  if (ordered_) {
    stream_ = stream;
  } else {
    MGT_CUDA_CHECK(cudaStreamCreateWithFlags(&own_stream_, cudaStreamNonBlocking));
    stream_ = own_stream_;
  }
  MGT_NCCL_CHECK(ncclCommInitRank(&comm_, size(), id, rank()));
}

NcclCommunicator::~NcclCommunicator() {
  // Destructors do not throw. Queued operations run to their end first: NCCL must not be torn
  // down under them. (The parts free their events and scratch after this.)
  cudaSetDevice(device_);
  if (comm_ && ordered_) drain(stream_);
  if (comm_ && side_stream_) drain(side_stream_);
  if (comm_) ncclCommDestroy(comm_);
  if (own_stream_) cudaStreamDestroy(own_stream_);
  if (side_stream_) cudaStreamDestroy(side_stream_);
}

std::optional<OverlapTiming> NcclCommunicator::take_overlap_timing() {
  if (!ordered_) return std::nullopt;
  use_device();
  return timing_.take();
}

void NcclCommunicator::use_device() { MGT_CUDA_CHECK(cudaSetDevice(device_)); }

void NcclCommunicator::wait(const char* operation) {
  for (;;) {
    const cudaError_t status = cudaStreamQuery(stream_);
    if (status == cudaSuccess) break;
    if (status != cudaErrorNotReady) MGT_CUDA_CHECK(status);
    check_async_error(operation);
    std::this_thread::yield();
  }
  watch_.retire_completed();  // everything queued before has run too
}

void NcclCommunicator::check_async_error(const char* operation) {
  ncclResult_t async = ncclSuccess;
  MGT_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
  if (async == ncclSuccess || async == ncclInProgress) return;
  ncclCommAbort(comm_);
  comm_ = nullptr;
  throw Error(std::string(operation) + " on the NCCL " + description() + " failed: " + ncclGetErrorString(async));
}

void NcclCommunicator::drain(cudaStream_t stream) noexcept {
  for (;;) {
    if (cudaStreamQuery(stream) != cudaErrorNotReady) return;
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &async) != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
      return;
    }
    std::this_thread::yield();
  }
}

void NcclCommunicator::mark_begin() {
  if (ordered_) timing_.mark_begin(stream_);
}

void NcclCommunicator::complete(const InFlightOperation& op, bool staged) {
  if (staged || !ordered_) {
    timing_.drop_begin();
    wait(op.operation);
  } else {
    timing_.end_in_stream(op.operation, stream_);
    queued(op);
  }
}

void NcclCommunicator::queued(const InFlightOperation& op) {
  check_async_error(op.operation);
  watch_.retire_completed();
  watch_.watch(op, stream_);
}

void NcclCommunicator::do_all_reduce(RecvBuffer data, ReduceOp op) {
  if (data.count == 0) return;
  if (sums_on_peers(data, op)) return start_all_reduce_on_peers(data)->wait();
  use_device();
  staging_.reserve_for(data);
  const DeviceView v = staging_.view(data.data, data.bytes(), data.space, 0, true, stream_);
  mark_begin();
  MGT_NCCL_CHECK(ncclAllReduce(v.device, v.device, count_of(data.count), nccl_type(data.type), nccl_op(op), comm_,
                               stream_));
  staging_.store(v, stream_);
  complete(operation("all_reduce", data.count, data.type, reduce_op_name(op)), v.host != nullptr);
}

void NcclCommunicator::do_all_gather(SendBuffer send, RecvBuffer recv) {
  if (send.count == 0) return;
  if (gathers_on_peers(send, recv)) return start_all_gather_on_peers(send, recv)->wait();
  const bool in_place = send.data == static_cast<const std::byte*>(recv.data) + rank() * send.bytes();
  use_device();
  staging_.reserve_for(send, recv);
  const DeviceView out = staging_.view(recv.data, recv.bytes(), recv.space, 0, in_place, stream_);
  bool staged = out.host != nullptr;
  const void* in = static_cast<std::byte*>(out.device) + rank() * send.bytes();
  if (!in_place) {
    const DeviceView v =
        staging_.view(send.data, send.bytes(), send.space, NcclStaging::aligned(recv.bytes()), true, stream_);
    in = v.device;
    staged = staged || v.host != nullptr;
  }
  mark_begin();
  gather(in, out.device, send, stream_);
  staging_.store(out, stream_);
  complete(operation("all_gather", recv.count, recv.type), staged);
}

void NcclCommunicator::gather(const void* in, void* out, SendBuffer send, cudaStream_t stream) {
  MGT_NCCL_CHECK(ncclAllGather(in, out, count_of(send.count), nccl_type(send.type), comm_, stream));
}

void NcclCommunicator::scatter(const void* in, void* out, RecvBuffer recv, ReduceOp op, cudaStream_t stream) {
  MGT_NCCL_CHECK(ncclReduceScatter(in, out, count_of(recv.count), nccl_type(recv.type), nccl_op(op), comm_, stream));
}

void NcclCommunicator::do_reduce_scatter(SendBuffer send, RecvBuffer recv, ReduceOp op) {
  if (recv.count == 0) return;
  if (scatters_on_peers(send, recv, op)) return start_reduce_scatter_on_peers(send, recv)->wait();
  const bool in_place = recv.data == static_cast<const std::byte*>(send.data) + rank() * recv.bytes();
  use_device();
  staging_.reserve_for(send, recv);
  const DeviceView in = staging_.view(send.data, send.bytes(), send.space, 0, true, stream_);
  DeviceView out;
  if (in_place && !in.host) {
    out.device = static_cast<std::byte*>(in.device) + rank() * recv.bytes();
  } else {
    // A staged in-place send gets its own staged receive buffer: the result is copied back
    // to the caller's chunk either way.
    out = staging_.view(recv.data, recv.bytes(), in.host ? MemorySpace::Host : recv.space,
                        NcclStaging::aligned(send.bytes()), false, stream_);
  }
  mark_begin();
  scatter(in.device, out.device, recv, op, stream_);
  staging_.store(out, stream_);
  complete(operation("reduce_scatter", send.count, send.type, reduce_op_name(op)),
           in.host != nullptr || out.host != nullptr);
}

void NcclCommunicator::do_reduce_scatter_chunks(RecvBuffer data, std::span<const std::int64_t> counts, ReduceOp op) {
  if (sums_on_peers(data, op)) return start_reduce_scatter_chunks_on_peers(data, counts)->wait();
  chunked(data, counts, "reduce_scatter", reduce_op_name(op), stream_,
          [&](void* chunk, std::size_t n, int root, cudaStream_t stream) {
    MGT_NCCL_CHECK(ncclReduce(chunk, chunk, n, nccl_type(data.type), nccl_op(op), root, comm_, stream));
  });
}

void NcclCommunicator::do_all_gather_chunks(RecvBuffer data, std::span<const std::int64_t> counts) {
  if (on_peers(data)) return start_all_gather_chunks_on_peers(data, counts)->wait();
  chunked(data, counts, "all_gather", nullptr, stream_, [&](void* chunk, std::size_t n, int root, cudaStream_t stream) {
    MGT_NCCL_CHECK(ncclBroadcast(chunk, chunk, n, nccl_type(data.type), root, comm_, stream));
  });
}

void NcclCommunicator::chunked(RecvBuffer data, std::span<const std::int64_t> counts, const char* name,
                               const char* reduce, cudaStream_t stream, const PerChunk& per_chunk) {
  if (data.count == 0) return;
  use_device();
  staging_.reserve_for(data);
  const DeviceView v = staging_.view(data.data, data.bytes(), data.space, 0, true, stream_);
  const std::size_t element = element_size(data.type);
  if (stream == stream_) mark_begin();
  MGT_NCCL_CHECK(ncclGroupStart());
  std::size_t offset = 0;
  for (int r = 0; r < size(); ++r) {
    const std::size_t n = count_of(counts[static_cast<std::size_t>(r)]);
    if (n > 0) per_chunk(static_cast<std::byte*>(v.device) + offset * element, n, r, stream);
    offset += n;
  }
  MGT_NCCL_CHECK(ncclGroupEnd());
  if (stream != stream_) return;  // the started form completes through its PendingTransfer
  staging_.store(v, stream_);
  complete(operation(name, data.count, data.type, reduce), v.host != nullptr);
}

void NcclCommunicator::do_broadcast(RecvBuffer data, int root) {
  if (data.count == 0) return;
  use_device();
  staging_.reserve_for(data);
  const DeviceView v = staging_.view(data.data, data.bytes(), data.space, 0, rank() == root, stream_);
  mark_begin();
  MGT_NCCL_CHECK(ncclBroadcast(v.device, v.device, count_of(data.count), nccl_type(data.type), root, comm_, stream_));
  if (rank() != root) staging_.store(v, stream_);
  complete(operation("broadcast", data.count, data.type, nullptr, "root", root), v.host != nullptr);
}

void NcclCommunicator::do_send(SendBuffer data, int dest) {
  if (data.count == 0) return;
  use_device();
  staging_.reserve_for(data);
  const DeviceView v = staging_.view(data.data, data.bytes(), data.space, 0, true, stream_);
  mark_begin();
  MGT_NCCL_CHECK(ncclSend(v.device, count_of(data.count), nccl_type(data.type), dest, comm_, stream_));
  complete(operation("send", data.count, data.type, nullptr, "to rank", dest), v.host != nullptr);
}

void NcclCommunicator::do_recv(RecvBuffer data, int source) {
  if (data.count == 0) return;
  use_device();
  staging_.reserve_for(data);
  const DeviceView v = staging_.view(data.data, data.bytes(), data.space, 0, false, stream_);
  mark_begin();
  MGT_NCCL_CHECK(ncclRecv(v.device, count_of(data.count), nccl_type(data.type), source, comm_, stream_));
  staging_.store(v, stream_);
  complete(operation("recv", data.count, data.type, nullptr, "from rank", source), v.host != nullptr);
}

void NcclCommunicator::do_send_recv(SendBuffer send, int dest, RecvBuffer recv, int source) {
  use_device();
  staging_.reserve_for(send, recv);
  const DeviceView in = staging_.view(send.data, send.bytes(), send.space, 0, true, stream_);
  const DeviceView out =
      staging_.view(recv.data, recv.bytes(), recv.space, NcclStaging::aligned(send.bytes()), false, stream_);
  // Both halves in one group, so neither waits for the other to be posted.
  mark_begin();
  MGT_NCCL_CHECK(ncclGroupStart());
  if (send.count > 0)
    MGT_NCCL_CHECK(ncclSend(in.device, count_of(send.count), nccl_type(send.type), dest, comm_, stream_));
  if (recv.count > 0)
    MGT_NCCL_CHECK(ncclRecv(out.device, count_of(recv.count), nccl_type(recv.type), source, comm_, stream_));
  MGT_NCCL_CHECK(ncclGroupEnd());
  staging_.store(out, stream_);
  complete(operation("send_recv", recv.count, recv.type, nullptr, "from rank", source),
           in.host != nullptr || out.host != nullptr);
}

void NcclCommunicator::do_all_to_all(SendBuffer send, std::span<const std::int64_t> send_counts, RecvBuffer recv,
                                     std::span<const std::int64_t> recv_counts) {
  use_device();
  staging_.reserve_for(send, recv);
  const DeviceView in = staging_.view(send.data, send.bytes(), send.space, 0, true, stream_);
  const DeviceView out =
      staging_.view(recv.data, recv.bytes(), recv.space, NcclStaging::aligned(send.bytes()), false, stream_);
  mark_begin();
  exchange(in.device, send_counts, out.device, recv_counts, send.type, stream_);
  staging_.store(out, stream_);
  complete(operation("all_to_all", recv.count, recv.type), in.host != nullptr || out.host != nullptr);
}

void NcclCommunicator::exchange(const void* in, std::span<const std::int64_t> send_counts, void* out,
                                std::span<const std::int64_t> recv_counts, ElementType type, cudaStream_t stream) {
  const std::size_t element = element_size(type);
  MGT_NCCL_CHECK(ncclGroupStart());
  std::size_t sent = 0, received = 0;
  for (int r = 0; r < size(); ++r) {
    const std::size_t n_send = count_of(send_counts[static_cast<std::size_t>(r)]);
    const std::size_t n_recv = count_of(recv_counts[static_cast<std::size_t>(r)]);
    if (n_send > 0)
      MGT_NCCL_CHECK(ncclSend(static_cast<const std::byte*>(in) + sent * element, n_send, nccl_type(type), r, comm_,
                              stream));
    if (n_recv > 0)
      MGT_NCCL_CHECK(ncclRecv(static_cast<std::byte*>(out) + received * element, n_recv, nccl_type(type), r, comm_,
                              stream));
    sent += n_send;
    received += n_recv;
  }
  MGT_NCCL_CHECK(ncclGroupEnd());
}

void NcclCommunicator::do_barrier() {
  use_device();
  staging_.reserve(NcclStaging::kAlign);
  // NCCL has no barrier: a one-element all-reduce completes only once every rank joined.
  MGT_NCCL_CHECK(ncclAllReduce(staging_.scratch(), staging_.scratch(), 1, ncclInt64, ncclSum, comm_, stream_));
  wait("barrier");
}

bool nccl_available() { return true; }

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, const DeviceQueue& queue,
                                                     const NcclOptions& options) {
  // ncclUniqueId is an opaque byte array; it travels as int64 words.
  std::array<std::int64_t, (sizeof(ncclUniqueId) + 7) / 8> words{};
  ncclUniqueId id{};
  if (bootstrap.rank() == 0) {
    MGT_NCCL_CHECK(ncclGetUniqueId(&id));
    std::memcpy(words.data(), &id, sizeof id);
  }
  bootstrap.broadcast(std::span<std::int64_t>(words), 0);
  std::memcpy(&id, words.data(), sizeof id);

  std::optional<CollectiveWatchdog::Scope> scope;
  if (bootstrap.watchdog())
    scope.emplace(
        bootstrap.watchdog()->watch(InFlightOperation{"ncclCommInitRank", nullptr, &bootstrap.description()}));
  // Collective over the bootstrap too: the same order on every rank.
  const bool one_node = options.node_of_world_rank.empty()
                            ? find_node_membership(bootstrap).nodes() == 1
                            : NodeMembership{options.node_of_world_rank, ""}.one_node(bootstrap.world_ranks());
  std::unique_ptr<PeerCopyCollectives> peer =
      PeerCopyCollectives::create(bootstrap, queue.device, options.peer_copies && queue.stream != nullptr, one_node);
  return std::make_unique<NcclCommunicator>(GroupMembers{bootstrap.kind(), bootstrap.world_ranks(), bootstrap.rank()},
                                            bootstrap.watchdog(), queue.device,
                                            static_cast<cudaStream_t>(queue.stream), id, std::move(peer));
}

}  // namespace mgt::dist
