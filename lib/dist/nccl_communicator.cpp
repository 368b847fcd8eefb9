#include "dist/nccl_communicator.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <array>
#include <cstring>
#include <optional>
#include <span>
#include <thread>

#include "core/error.hpp"
#include "dist/nccl_check.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace mgt::dist {
namespace {

ncclDataType_t nccl_type(ElementType type) {
  switch (type) {
    case ElementType::Float32: return ncclFloat32;
    case ElementType::Float64: return ncclFloat64;
    case ElementType::Int64: return ncclInt64;
    case ElementType::BFloat16: return ncclBfloat16;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::Sum ? ncclSum : ncclMax; }

std::size_t count_of(std::int64_t count) { return static_cast<std::size_t>(count); }

// Device scratch offsets stay aligned for every element type.
constexpr std::size_t kAlign = 256;
std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

class NcclCommunicator final : public Communicator {
public:
  NcclCommunicator(GroupMembers members, CollectiveWatchdog* watchdog, int device,
                   const ncclUniqueId& id)
      : Communicator(std::move(members), watchdog), device_(device) {
    MGT_CUDA_CHECK(cudaSetDevice(device_));
    MGT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    MGT_NCCL_CHECK(ncclCommInitRank(&comm_, size(), id, rank()));
  }

  ~NcclCommunicator() override {
    // Destructors do not throw; every operation has completed by now.
    cudaSetDevice(device_);
    if (comm_) ncclCommDestroy(comm_);
    if (scratch_) cudaFree(scratch_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  const char* transport() const override { return "nccl"; }

private:
  // A buffer as NCCL sees it: device memory, either the caller's or a staged copy of host
  // memory in the scratch allocation.
  struct DeviceView {
    void* device = nullptr;
    void* host = nullptr;  // non-null when staged: where results go back to
    std::size_t bytes = 0;
  };

  bool on_this_device(const void* data) const {
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, data) != cudaSuccess) {
      cudaGetLastError();  // plain host memory may report an error on old drivers; clear it
      return false;
    }
    if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged)
      return false;
    if (attributes.device != device_)
      throw Error("a buffer on CUDA device " + std::to_string(attributes.device) +
                  " was given to the NCCL " + description() + " on device " +
                  std::to_string(device_));
    return true;
  }

  // Reserves `total` bytes of scratch (grown, never shrunk).
  void reserve_scratch(std::size_t total) {
    if (total <= scratch_bytes_) return;
    if (scratch_) MGT_CUDA_CHECK(cudaFree(scratch_));
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    MGT_CUDA_CHECK(cudaMalloc(&scratch_, total));
    scratch_bytes_ = total;
  }

  // `offset`: where in the scratch a staged copy goes (the caller reserved enough).
  DeviceView view(const void* data, std::size_t bytes, MemorySpace space, std::size_t offset,
                  bool load) {
    DeviceView v;
    v.bytes = bytes;
    if (bytes == 0 || (space == MemorySpace::Backend && on_this_device(data))) {
      v.device = const_cast<void*>(data);  // written only for receive buffers
      return v;
    }
    v.device = static_cast<std::byte*>(scratch_) + offset;
    v.host = const_cast<void*>(data);
    if (load)
      MGT_CUDA_CHECK(cudaMemcpyAsync(v.device, data, bytes, cudaMemcpyHostToDevice, stream_));
    return v;
  }

  // Reserves scratch for both buffers, whichever turn out to need staging (host buffers, and
  // backend buffers that are a CPU backend's host memory).
  void reserve_for(SendBuffer a, SendBuffer b = {}) {
    reserve_scratch(aligned(a.bytes()) + aligned(b.bytes()) + kAlign);
  }

  void store(const DeviceView& v) {
    if (v.host && v.bytes > 0)
      MGT_CUDA_CHECK(cudaMemcpyAsync(v.host, v.device, v.bytes, cudaMemcpyDeviceToHost, stream_));
  }

  // Waits for the stream while watching for NCCL's asynchronous errors (a peer that failed),
  // which a plain cudaStreamSynchronize would never report.
  void wait(const char* operation) {
    for (;;) {
      const cudaError_t status = cudaStreamQuery(stream_);
      if (status == cudaSuccess) return;
      if (status != cudaErrorNotReady) MGT_CUDA_CHECK(status);
      ncclResult_t async = ncclSuccess;
      MGT_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
      if (async != ncclSuccess && async != ncclInProgress) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        throw Error(std::string(operation) + " on the NCCL " + description() +
                    " failed: " + ncclGetErrorString(async));
      }
      std::this_thread::yield();
    }
  }

  void use_device() { MGT_CUDA_CHECK(cudaSetDevice(device_)); }

  void do_all_reduce(RecvBuffer data, ReduceOp op) override {
    if (data.count == 0) return;
    use_device();
    reserve_for(data);
    const DeviceView v = view(data.data, data.bytes(), data.space, 0, true);
    MGT_NCCL_CHECK(ncclAllReduce(v.device, v.device, count_of(data.count), nccl_type(data.type),
                                 nccl_op(op), comm_, stream_));
    store(v);
    wait("all_reduce");
  }

  void do_all_gather(SendBuffer send, RecvBuffer recv) override {
    if (send.count == 0) return;
    use_device();
    reserve_for(send, recv);
    const bool in_place =
        send.data == static_cast<const std::byte*>(recv.data) + rank() * send.bytes();
    const DeviceView out = view(recv.data, recv.bytes(), recv.space, 0, in_place);
    const void* in = in_place ? static_cast<std::byte*>(out.device) + rank() * send.bytes()
                              : view(send.data, send.bytes(), send.space,
                                     aligned(recv.bytes()), true).device;
    MGT_NCCL_CHECK(ncclAllGather(in, out.device, count_of(send.count), nccl_type(send.type),
                                 comm_, stream_));
    store(out);
    wait("all_gather");
  }

  void do_reduce_scatter(SendBuffer send, RecvBuffer recv, ReduceOp op) override {
    if (recv.count == 0) return;
    use_device();
    reserve_for(send, recv);
    const bool in_place =
        recv.data == static_cast<const std::byte*>(send.data) + rank() * recv.bytes();
    const DeviceView in = view(send.data, send.bytes(), send.space, 0, true);
    DeviceView out;
    if (in_place && !in.host) {
      out.device = static_cast<std::byte*>(in.device) + rank() * recv.bytes();
    } else {
      // A staged in-place send gets its own staged receive buffer: the result is copied back
      // to the caller's chunk either way.
      out = view(recv.data, recv.bytes(), in.host ? MemorySpace::Host : recv.space,
                 aligned(send.bytes()), false);
    }
    MGT_NCCL_CHECK(ncclReduceScatter(in.device, out.device, count_of(recv.count),
                                     nccl_type(recv.type), nccl_op(op), comm_, stream_));
    store(out);
    wait("reduce_scatter");
  }

  void do_broadcast(RecvBuffer data, int root) override {
    if (data.count == 0) return;
    use_device();
    reserve_for(data);
    const DeviceView v = view(data.data, data.bytes(), data.space, 0, rank() == root);
    MGT_NCCL_CHECK(ncclBroadcast(v.device, v.device, count_of(data.count), nccl_type(data.type),
                                 root, comm_, stream_));
    if (rank() != root) store(v);
    wait("broadcast");
  }

  void do_send(SendBuffer data, int dest) override {
    if (data.count == 0) return;
    use_device();
    reserve_for(data);
    const DeviceView v = view(data.data, data.bytes(), data.space, 0, true);
    MGT_NCCL_CHECK(
        ncclSend(v.device, count_of(data.count), nccl_type(data.type), dest, comm_, stream_));
    wait("send");
  }

  void do_recv(RecvBuffer data, int source) override {
    if (data.count == 0) return;
    use_device();
    reserve_for(data);
    const DeviceView v = view(data.data, data.bytes(), data.space, 0, false);
    MGT_NCCL_CHECK(
        ncclRecv(v.device, count_of(data.count), nccl_type(data.type), source, comm_, stream_));
    store(v);
    wait("recv");
  }

  void do_send_recv(SendBuffer send, int dest, RecvBuffer recv, int source) override {
    use_device();
    reserve_for(send, recv);
    const DeviceView in = view(send.data, send.bytes(), send.space, 0, true);
    const DeviceView out = view(recv.data, recv.bytes(), recv.space, aligned(send.bytes()), false);
    // Both halves in one group, so neither waits for the other to be posted.
    MGT_NCCL_CHECK(ncclGroupStart());
    if (send.count > 0)
      MGT_NCCL_CHECK(ncclSend(in.device, count_of(send.count), nccl_type(send.type), dest, comm_,
                              stream_));
    if (recv.count > 0)
      MGT_NCCL_CHECK(ncclRecv(out.device, count_of(recv.count), nccl_type(recv.type), source,
                              comm_, stream_));
    MGT_NCCL_CHECK(ncclGroupEnd());
    store(out);
    wait("send_recv");
  }

  void do_barrier() override {
    use_device();
    reserve_scratch(kAlign);
    // NCCL has no barrier: a one-element all-reduce completes only once every rank joined.
    MGT_NCCL_CHECK(ncclAllReduce(scratch_, scratch_, 1, ncclInt64, ncclSum, comm_, stream_));
    wait("barrier");
  }

  int device_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
};

}  // namespace

bool nccl_available() { return true; }

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int cuda_device) {
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
    scope.emplace(bootstrap.watchdog()->watch(
        InFlightOperation{"ncclCommInitRank", nullptr, &bootstrap.description()}));
  return std::make_unique<NcclCommunicator>(
      GroupMembers{bootstrap.kind(), bootstrap.world_ranks(), bootstrap.rank()},
      bootstrap.watchdog(), cuda_device, id);
}

}  // namespace mgt::dist
