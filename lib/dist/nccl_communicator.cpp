#include "dist/nccl_communicator.hpp"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "dist/nccl_check.hpp"
#include "dist/nccl_peer_copy.hpp"
#include "kernels/cuda_check.hpp"

namespace mgt::dist {
namespace {

ncclDataType_t nccl_type(ElementType type) {
  switch (type) {
    case ElementType::Float32: return ncclFloat32;
    case ElementType::Float64: return ncclFloat64;
    case ElementType::Int64: return ncclInt64;
    case ElementType::BFloat16: return ncclBfloat16;
    case ElementType::Float16: return ncclFloat16;
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
  // `stream` null: the communicator's own, every operation waited for.
  // `peer`: the copy-engine collectives over registered buffers (null: none).
  NcclCommunicator(GroupMembers members, CollectiveWatchdog* watchdog, int device,
                   cudaStream_t stream, const ncclUniqueId& id, const NcclOptions& options,
                   std::unique_ptr<PeerCopyCollectives> peer)
      : Communicator(std::move(members), watchdog), device_(device), ordered_(stream != nullptr),
        peer_(std::move(peer)) {
    MGT_CUDA_CHECK(cudaSetDevice(device_));
    if (ordered_) {
      stream_ = stream;
    } else {
      MGT_CUDA_CHECK(cudaStreamCreateWithFlags(&own_stream_, cudaStreamNonBlocking));
      stream_ = own_stream_;
    }
    if (options.max_ctas > 0) {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.maxCTAs = options.max_ctas;
      config.minCTAs = std::min(config.minCTAs == NCCL_CONFIG_UNDEF_INT ? 1 : config.minCTAs, options.max_ctas);
      MGT_NCCL_CHECK(ncclCommInitRankConfig(&comm_, size(), id, rank(), &config));
    } else {
      MGT_NCCL_CHECK(ncclCommInitRank(&comm_, size(), id, rank()));
    }
  }

  ~NcclCommunicator() override {
    // Destructors do not throw. Queued operations run to their end first: NCCL must not be torn
    // down under them.
    cudaSetDevice(device_);
    if (comm_ && ordered_) drain(stream_);
    if (comm_ && side_stream_) drain(side_stream_);
    while (!queued_.empty()) release_oldest();
    for (cudaEvent_t event : spare_events_) cudaEventDestroy(event);
    for (const Timed& t : timed_)
      for (cudaEvent_t event : {t.begin, t.end, t.waited})
        if (event) cudaEventDestroy(event);
    for (cudaEvent_t event : spare_timed_) cudaEventDestroy(event);
    for (const InStream& t : in_stream_timed_) {
      cudaEventDestroy(t.begin);
      cudaEventDestroy(t.end);
    }
    if (pending_begin_) cudaEventDestroy(pending_begin_);
    if (comm_) ncclCommDestroy(comm_);
    if (scratch_) cudaFree(scratch_);
    if (own_stream_) cudaStreamDestroy(own_stream_);
    if (side_stream_) cudaStreamDestroy(side_stream_);
  }

  const char* transport() const override { return "nccl"; }
  bool stream_ordered() const override { return ordered_; }

  std::optional<OverlapTiming> take_overlap_timing() override {
    if (!ordered_) return std::nullopt;
    use_device();
    OverlapTiming timing;
    // Oldest first, up to the first one not waited for or not complete (a gather the next
    // forward has yet to wait for): those stay for the next call.
    while (!timed_.empty()) {
      Timed& t = timed_.front();
      if (!t.waited || cudaEventQuery(t.waited) != cudaSuccess || cudaEventQuery(t.end) != cudaSuccess) break;
      float busy = 0.0f, exposed = 0.0f;
      MGT_CUDA_CHECK(cudaEventElapsedTime(&busy, t.begin, t.end));
      MGT_CUDA_CHECK(cudaEventElapsedTime(&exposed, t.waited, t.end));
      // The compute stream may reach its wait a few microseconds before the side stream, held by
      // its own wait for the start, begins the collective: that is latency of the hand-over, not
      // communication, so no collective counts as waited for longer than it ran.
      const float waited = std::clamp(exposed, 0.0f, busy);
      timing.busy_seconds += busy / 1e3;
      timing.exposed_seconds += waited / 1e3;
      ++timing.operations;
      timing.add_part(t.operation, true, busy / 1e3, waited / 1e3);
      for (cudaEvent_t event : {t.begin, t.end, t.waited}) spare_timed_.push_back(event);
      timed_.pop_front();
      ++first_timed_;
    }
    while (!in_stream_timed_.empty()) {
      const InStream timed = in_stream_timed_.front();
      if (cudaEventQuery(timed.end) != cudaSuccess) break;
      float ms = 0.0f;
      MGT_CUDA_CHECK(cudaEventElapsedTime(&ms, timed.begin, timed.end));
      timing.in_stream_seconds += ms / 1e3;
      ++timing.in_stream_operations;
      timing.add_part(timed.operation, false, ms / 1e3, ms / 1e3);
      spare_timed_.push_back(timed.begin);
      spare_timed_.push_back(timed.end);
      in_stream_timed_.pop_front();
    }
    cudaGetLastError();  // a query's cudaErrorNotReady is not sticky, but clear it all the same
    return timing;
  }

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

  // Host buffers, and backend buffers that are a CPU backend's host memory.
  bool needs_staging(SendBuffer b) const {
    return b.count > 0 && !(b.space == MemorySpace::Backend && on_this_device(b.data));
  }

  // Reserves scratch for both buffers when either needs staging (the offsets view() is given
  // assume both are staged). Device buffers alone need none: a gradient buffer of gigabytes
  // must not get a copy.
  void reserve_for(SendBuffer a, SendBuffer b = {}) {
    if (needs_staging(a) || needs_staging(b))
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
      if (status == cudaSuccess) break;
      if (status != cudaErrorNotReady) MGT_CUDA_CHECK(status);
      check_async_error(operation);
      std::this_thread::yield();
    }
    retire_completed();  // everything queued before has run too
  }

  void check_async_error(const char* operation) {
    ncclResult_t async = ncclSuccess;
    MGT_NCCL_CHECK(ncclCommGetAsyncError(comm_, &async));
    if (async == ncclSuccess || async == ncclInProgress) return;
    ncclCommAbort(comm_);
    comm_ = nullptr;
    throw Error(std::string(operation) + " on the NCCL " + description() +
                " failed: " + ncclGetErrorString(async));
  }

  // The end of every operation: one that staged a buffer through the scratch (whose results are
  // copied back to the host) or runs on the communicator's own stream returns complete; one on
  // device buffers in the caller's stream stays queued there.
  void complete(const InFlightOperation& op, bool staged) {
    cudaEvent_t begin = std::exchange(pending_begin_, nullptr);
    if (staged || !ordered_) {
      if (begin) spare_timed_.push_back(begin);
      wait(op.operation);
    } else {
      if (begin) {
        // Where nobody takes the timings, the finished ones are dropped now and then.
        if (in_stream_timed_.size() >= kMaxTimed) take_overlap_timing();
        cudaEvent_t end = take_timed_event();
        MGT_CUDA_CHECK(cudaEventRecord(end, stream_));
        in_stream_timed_.push_back({begin, end, op.operation});
      }
      queued(op);
    }
  }

  // Just before an operation's NCCL call on stream_: an event that starts its timing there
  // (complete() ends it).
  void mark_begin() {
    if (!ordered_) return;
    if (!pending_begin_) pending_begin_ = take_timed_event();
    MGT_CUDA_CHECK(cudaEventRecord(pending_begin_, stream_));
  }

  // An operation left queued on the caller's stream: a failure NCCL already knows of is reported
  // now, and the operation stays watched until an event recorded after it has completed, so that
  // a peer that never joins it still ends the job (the host may next wait for the stream
  // anywhere, outside any communicator call).
  void queued(const InFlightOperation& op) {
    check_async_error(op.operation);
    retire_completed();
    if (!watchdog()) return;
    cudaEvent_t done = take_event();
    MGT_CUDA_CHECK(cudaEventRecord(done, stream_));
    // Asked on the watchdog's thread, past the deadline only; that thread's current device
    // must be this one, or the query could start a context on another GPU.
    const int device = device_;
    queued_.push_back({done, watchdog()->watch(op, [done, device] {
                         return cudaSetDevice(device) == cudaSuccess &&
                                cudaEventQuery(done) == cudaSuccess;
                       })});
  }

  // An event from `spares`, or a new one with `flags`.
  static cudaEvent_t take_event(std::vector<cudaEvent_t>& spares, unsigned flags) {
    cudaEvent_t event = nullptr;
    if (spares.empty()) {
      MGT_CUDA_CHECK(cudaEventCreateWithFlags(&event, flags));
    } else {
      event = spares.back();
      spares.pop_back();
    }
    return event;
  }
  cudaEvent_t take_event() { return take_event(spare_events_, cudaEventDisableTiming); }
  // Events that time the started operations.
  cudaEvent_t take_timed_event() { return take_event(spare_timed_, cudaEventDefault); }

  // Ends the watch of the queued operations that have run (they run in queue order).
  void retire_completed() {
    while (!queued_.empty()) {
      const cudaError_t status = cudaEventQuery(queued_.front().done);
      if (status == cudaErrorNotReady) return;
      if (status != cudaSuccess) MGT_CUDA_CHECK(status);
      release_oldest();
    }
  }

  void release_oldest() {
    Queued& oldest = queued_.front();
    oldest.watch.reset();  // the watchdog stops asking about the event before it is reused
    spare_events_.push_back(oldest.done);
    queued_.pop_front();
  }

  // For the destructor: waits for one of the streams, giving up (and aborting NCCL, which
  // frees the stream) when NCCL reports a failed peer. Operations still watched end the job
  // through the watchdog if they never finish.
  void drain(cudaStream_t stream) noexcept {
    for (;;) {
      if (cudaStreamQuery(stream) != cudaErrorNotReady) return;
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm_, &async) != ncclSuccess ||
          (async != ncclSuccess && async != ncclInProgress)) {
        ncclCommAbort(comm_);
        comm_ = nullptr;
        return;
      }
      std::this_thread::yield();
    }
  }

  InFlightOperation operation(const char* name, std::int64_t count, ElementType type,
                              const char* reduce = nullptr, const char* peer_role = nullptr,
                              int peer = -1) const {
    return InFlightOperation{name, reduce, &description(), count, type, peer_role, peer};
  }

  void use_device() { MGT_CUDA_CHECK(cudaSetDevice(device_)); }

  void do_all_reduce(RecvBuffer data, ReduceOp op) override {
    if (data.count == 0) return;
    if (sums_on_peers(data, op)) return start_all_reduce_on_peers(data)->wait();
    use_device();
    reserve_for(data);
    const DeviceView v = view(data.data, data.bytes(), data.space, 0, true);
    mark_begin();
    MGT_NCCL_CHECK(ncclAllReduce(v.device, v.device, count_of(data.count), nccl_type(data.type),
                                 nccl_op(op), comm_, stream_));
    store(v);
    complete(operation("all_reduce", data.count, data.type, reduce_op_name(op)), v.host != nullptr);
  }

  void do_all_gather(SendBuffer send, RecvBuffer recv) override {
    if (send.count == 0) return;
    if (gathers_on_peers(send, recv)) return start_all_gather_on_peers(send, recv)->wait();
    const bool in_place =
        send.data == static_cast<const std::byte*>(recv.data) + rank() * send.bytes();
    use_device();
    reserve_for(send, recv);
    const DeviceView out = view(recv.data, recv.bytes(), recv.space, 0, in_place);
    bool staged = out.host != nullptr;
    const void* in = static_cast<std::byte*>(out.device) + rank() * send.bytes();
    if (!in_place) {
      const DeviceView v = view(send.data, send.bytes(), send.space, aligned(recv.bytes()), true);
      in = v.device;
      staged = staged || v.host != nullptr;
    }
    mark_begin();
    gather(in, out.device, send, stream_);
    store(out);
    complete(operation("all_gather", recv.count, recv.type), staged);
  }

  void gather(const void* in, void* out, SendBuffer send, cudaStream_t stream) {
    MGT_NCCL_CHECK(ncclAllGather(in, out, count_of(send.count), nccl_type(send.type), comm_, stream));
  }

  void scatter(const void* in, void* out, RecvBuffer recv, ReduceOp op, cudaStream_t stream) {
    MGT_NCCL_CHECK(
        ncclReduceScatter(in, out, count_of(recv.count), nccl_type(recv.type), nccl_op(op), comm_, stream));
  }

  void do_reduce_scatter(SendBuffer send, RecvBuffer recv, ReduceOp op) override {
    if (recv.count == 0) return;
    if (scatters_on_peers(send, recv, op)) return start_reduce_scatter_on_peers(send, recv)->wait();
    const bool in_place =
        recv.data == static_cast<const std::byte*>(send.data) + rank() * recv.bytes();
    use_device();
    reserve_for(send, recv);
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
    mark_begin();
    scatter(in.device, out.device, recv, op, stream_);
    store(out);
    complete(operation("reduce_scatter", send.count, send.type, reduce_op_name(op)),
             in.host != nullptr || out.host != nullptr);
  }

  // The chunked collectives as one NCCL group of a reduce (all-gather: broadcast) per chunk,
  // rooted at the chunk's rank, in place: NCCL has no reduce-scatter of unequal chunks.
  void do_reduce_scatter_chunks(RecvBuffer data, std::span<const std::int64_t> counts,
                                ReduceOp op) override {
    if (sums_on_peers(data, op)) return start_reduce_scatter_chunks_on_peers(data, counts)->wait();
    chunked(data, counts, "reduce_scatter", reduce_op_name(op), stream_,
            [&](void* chunk, std::size_t n, int root, cudaStream_t stream) {
      MGT_NCCL_CHECK(ncclReduce(chunk, chunk, n, nccl_type(data.type), nccl_op(op), root, comm_, stream));
    });
  }

  void do_all_gather_chunks(RecvBuffer data, std::span<const std::int64_t> counts) override {
    if (on_peers(data)) return start_all_gather_chunks_on_peers(data, counts)->wait();
    chunked(data, counts, "all_gather", nullptr, stream_,
            [&](void* chunk, std::size_t n, int root, cudaStream_t stream) {
      MGT_NCCL_CHECK(ncclBroadcast(chunk, chunk, n, nccl_type(data.type), root, comm_, stream));
    });
  }

  // `stream`: stream_, or the side stream for a started operation on device memory (which
  // needs no staging, so view() queues nothing on stream_).
  template <typename PerChunk>
  void chunked(RecvBuffer data, std::span<const std::int64_t> counts, const char* name,
               const char* reduce, cudaStream_t stream, PerChunk per_chunk) {
    if (data.count == 0) return;
    use_device();
    reserve_for(data);
    const DeviceView v = view(data.data, data.bytes(), data.space, 0, true);
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
    store(v);
    complete(operation(name, data.count, data.type, reduce), v.host != nullptr);
  }

  // ---- started operations: on the side stream, so that they run beside the compute ----
  // A started operation on this device's memory, on a stream-ordered communicator, waits on the
  // side stream for what stream_ had queued when it started, runs there while stream_ goes on
  // with the backward (or forward), and at wait() stream_ waits for it on the device: no host
  // synchronisation either way. NCCL runs one communicator's kernels in the order they were
  // issued whatever their streams, so the ranks' common order of operations still holds.
  // Anything else (host memory, an unordered communicator) runs as the blocking form.
  class SidePending final : public PendingTransfer {
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

  // A started operation's events: `begin` and `end` on the side stream around it, `waited` on
  // stream_ where the wait was asked for (null until then).
  struct Timed {
    cudaEvent_t begin = nullptr;
    cudaEvent_t end = nullptr;
    cudaEvent_t waited = nullptr;
    const char* operation = "";  // InFlightOperation::operation, a literal
  };
  // One queued on the compute stream, between two events there.
  struct InStream {
    cudaEvent_t begin = nullptr;
    cudaEvent_t end = nullptr;
    const char* operation = "";
  };

  Timed& timed(std::uint64_t serial) { return timed_.at(static_cast<std::size_t>(serial - first_timed_)); }

  bool runs_beside(SendBuffer data) const {
    return ordered_ && data.count > 0 && data.space == MemorySpace::Backend && on_this_device(data.data);
  }

  // The side stream, made on first use with the highest priority: a collective's few blocks are
  // scheduled ahead of the compute kernels' waiting ones, so the transfer keeps moving.
  cudaStream_t side_stream() {
    if (!side_stream_) {
      int least = 0, greatest = 0;
      MGT_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      MGT_CUDA_CHECK(cudaStreamCreateWithPriority(&side_stream_, cudaStreamNonBlocking, greatest));
    }
    return side_stream_;
  }

  // Before a started operation: the side stream waits for stream_'s work so far.
  cudaStream_t begin_started() {
    use_device();
    cudaStream_t side = side_stream();
    cudaEvent_t ready = take_event();
    MGT_CUDA_CHECK(cudaEventRecord(ready, stream_));
    MGT_CUDA_CHECK(cudaStreamWaitEvent(side, ready, 0));
    // Reusable at once: the wait captured the event's current state.
    spare_events_.push_back(ready);
    // Where nobody takes the timings, the finished ones are dropped now and then.
    if (timed_.size() >= kMaxTimed) take_overlap_timing();
    Timed t;
    t.begin = take_timed_event();
    MGT_CUDA_CHECK(cudaEventRecord(t.begin, side));
    timed_.push_back(t);
    return side;
  }

  std::unique_ptr<PendingTransfer> finish_started(const InFlightOperation& op) {
    check_async_error(op.operation);
    Timed& t = timed_.back();
    t.operation = op.operation;
    t.end = take_timed_event();
    MGT_CUDA_CHECK(cudaEventRecord(t.end, side_stream_));
    return std::make_unique<SidePending>(*this, first_timed_ + timed_.size() - 1, op);
  }

  // stream_ waits for the started operation; it stays watched until stream_ has passed that
  // point (queued()). Without `report` (a handle dropped while unwinding) errors are swallowed.
  void end_started(std::uint64_t serial, const InFlightOperation& op, bool report) {
    try {
      use_device();
      Timed& t = timed(serial);
      t.waited = take_timed_event();
      MGT_CUDA_CHECK(cudaEventRecord(t.waited, stream_));
      MGT_CUDA_CHECK(cudaStreamWaitEvent(stream_, t.end, 0));
      if (comm_) queued(op);
    } catch (...) {
      if (report) throw;
    }
  }



  std::unique_ptr<PendingTransfer> do_start_all_reduce(RecvBuffer data, ReduceOp op) override {
    if (sums_on_peers(data, op)) return start_all_reduce_on_peers(data);
    if (!runs_beside(data)) {
      do_all_reduce(data, op);
      return nullptr;
    }
    cudaStream_t side = begin_started();
    MGT_NCCL_CHECK(ncclAllReduce(data.data, data.data, count_of(data.count), nccl_type(data.type),
                                 nccl_op(op), comm_, side));
    return finish_started(operation("all_reduce", data.count, data.type, reduce_op_name(op)));
  }

  std::unique_ptr<PendingTransfer> do_start_all_gather(SendBuffer send, RecvBuffer recv) override {
    if (gathers_on_peers(send, recv)) return start_all_gather_on_peers(send, recv);
    if (!runs_beside(send) || !runs_beside(recv)) {
      do_all_gather(send, recv);
      return nullptr;
    }
    cudaStream_t side = begin_started();
    gather(send.data, recv.data, send, side);
    return finish_started(operation("all_gather", recv.count, recv.type));
  }

  std::unique_ptr<PendingTransfer> do_start_reduce_scatter(SendBuffer send, RecvBuffer recv, ReduceOp op) override {
    if (scatters_on_peers(send, recv, op)) return start_reduce_scatter_on_peers(send, recv);
    if (!runs_beside(send) || !runs_beside(recv)) {
      do_reduce_scatter(send, recv, op);
      return nullptr;
    }
    cudaStream_t side = begin_started();
    scatter(send.data, recv.data, recv, op, side);
    return finish_started(operation("reduce_scatter", send.count, send.type, reduce_op_name(op)));
  }

  std::unique_ptr<PendingTransfer> do_start_send_recv(SendBuffer send, int dest, RecvBuffer recv,
                                                      int source) override {
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

  std::unique_ptr<PendingTransfer> do_start_swap(SendBuffer send, RecvBuffer recv) override {
    if (!on_peers(send) || !on_peers(recv)) return do_start_send_recv(send, 1 - rank(), recv, 1 - rank());
    // Each rank's `send` lies where the other's `recv` does: each reads its part from the other.
    return start_on_peers(operation("send_recv", recv.count, recv.type, nullptr, "from rank", 1 - rank()),
                          [&](cudaStream_t side) { peer_->fetch(recv.data, recv.bytes(), 1 - rank(), side); });
  }

  std::unique_ptr<PendingTransfer> do_start_reduce_scatter_chunks(
      RecvBuffer data, std::span<const std::int64_t> counts, ReduceOp op) override {
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

  std::unique_ptr<PendingTransfer> do_start_all_gather_chunks(
      RecvBuffer data, std::span<const std::int64_t> counts) override {
    if (on_peers(data)) return start_all_gather_chunks_on_peers(data, counts);
    if (!runs_beside(data)) {
      do_all_gather_chunks(data, counts);
      return nullptr;
    }
    cudaStream_t side = begin_started();
    chunked(data, counts, "all_gather", nullptr, side,
            [&](void* chunk, std::size_t n, int root, cudaStream_t stream) {
      MGT_NCCL_CHECK(ncclBroadcast(chunk, chunk, n, nccl_type(data.type), root, comm_, stream));
    });
    return finish_started(operation("all_gather", data.count, data.type));
  }

  // ---- the copy engines' collectives over registered buffers (nccl_peer_copy.hpp) ----
  // Started like the others, on the side stream: every one of them must run on one stream.
  // Every rank routes alike: the buffers were registered on all of them, at the same sizes.
  bool on_peers(SendBuffer data) const {
    return peer_ && ordered_ && data.count > 0 && data.space == MemorySpace::Backend &&
           peer_->covers(data.data, data.bytes());
  }
  // Reductions started alone (Communicator::set_alone) go to NCCL's kernels, faster with
  // nothing computing beside them.
  bool sums_on_peers(SendBuffer data, ReduceOp op) const {
    return op == ReduceOp::Sum && PeerCopyCollectives::sums(data.type) && on_peers(data) && !alone();
  }
  // An all-gather into a registered buffer from this device's memory (the receive buffer's part,
  // or any other place).
  bool gathers_on_peers(SendBuffer send, RecvBuffer recv) const { return on_peers(recv) && runs_beside(send); }
  // A reduce-scatter from a registered buffer into this device's memory.
  bool scatters_on_peers(SendBuffer send, RecvBuffer recv, ReduceOp op) const {
    return sums_on_peers(send, op) && runs_beside(recv);
  }

  template <typename Run>
  std::unique_ptr<PendingTransfer> start_on_peers(const InFlightOperation& op, Run run) {
    cudaStream_t side = begin_started();
    run(side);
    return finish_started(op);
  }
  std::unique_ptr<PendingTransfer> start_all_reduce_on_peers(RecvBuffer data) {
    return start_on_peers(operation("all_reduce", data.count, data.type, "sum"), [&](cudaStream_t side) {
      peer_->all_reduce_sum(data.data, data.count, data.type, side);
    });
  }
  std::unique_ptr<PendingTransfer> start_reduce_scatter_chunks_on_peers(RecvBuffer data,
                                                                        std::span<const std::int64_t> counts) {
    return start_on_peers(operation("reduce_scatter", data.count, data.type, "sum"), [&](cudaStream_t side) {
      peer_->reduce_scatter_chunks_sum(data.data, counts, data.type, side);
    });
  }
  std::unique_ptr<PendingTransfer> start_all_gather_on_peers(SendBuffer send, RecvBuffer recv) {
    return start_on_peers(operation("all_gather", recv.count, recv.type), [&](cudaStream_t side) {
      void* own = static_cast<std::byte*>(recv.data) + rank() * send.bytes();
      if (own != send.data) MGT_CUDA_CHECK(cudaMemcpyAsync(own, send.data, send.bytes(), cudaMemcpyDeviceToDevice, side));
      const std::vector<std::int64_t> counts(static_cast<std::size_t>(size()), send.count);
      peer_->all_gather_chunks(recv.data, counts, recv.type, side);
    });
  }
  std::unique_ptr<PendingTransfer> start_reduce_scatter_on_peers(SendBuffer send, RecvBuffer recv) {
    return start_on_peers(operation("reduce_scatter", send.count, send.type, "sum"), [&](cudaStream_t side) {
      peer_->reduce_scatter_sum(send.data, recv.count, send.type, recv.data, side);
    });
  }
  std::unique_ptr<PendingTransfer> start_all_gather_chunks_on_peers(RecvBuffer data,
                                                                    std::span<const std::int64_t> counts) {
    return start_on_peers(operation("all_gather", data.count, data.type), [&](cudaStream_t side) {
      peer_->all_gather_chunks(data.data, counts, data.type, side);
    });
  }

  void do_unregister_buffer(RecvBuffer data) override {
    if (!peer_) return;
    use_device();
    // Nothing may still read or write it, here or on a peer.
    if (ordered_) wait("unregister_buffer");
    if (side_stream_) MGT_CUDA_CHECK(cudaStreamSynchronize(side_stream_));
    peer_->unregister_buffer(data.data);
    // Every rank has unmapped the others' copies before any frees its own.
    do_barrier();
  }

  bool do_register_buffer(RecvBuffer data) override {
    if (!peer_) return false;  // alike on every rank (PeerCopyCollectives::create)
    use_device();
    const bool shareable = ordered_ && data.count > 0 && data.space == MemorySpace::Backend && on_this_device(data.data);
    return peer_->register_buffer(*this, shareable ? data.data : nullptr, data.bytes());
  }

  void do_broadcast(RecvBuffer data, int root) override {
    if (data.count == 0) return;
    use_device();
    reserve_for(data);
    const DeviceView v = view(data.data, data.bytes(), data.space, 0, rank() == root);
    mark_begin();
    MGT_NCCL_CHECK(ncclBroadcast(v.device, v.device, count_of(data.count), nccl_type(data.type),
                                 root, comm_, stream_));
    if (rank() != root) store(v);
    complete(operation("broadcast", data.count, data.type, nullptr, "root", root), v.host != nullptr);
  }

  void do_send(SendBuffer data, int dest) override {
    if (data.count == 0) return;
    use_device();
    reserve_for(data);
    const DeviceView v = view(data.data, data.bytes(), data.space, 0, true);
    mark_begin();
    MGT_NCCL_CHECK(
        ncclSend(v.device, count_of(data.count), nccl_type(data.type), dest, comm_, stream_));
    complete(operation("send", data.count, data.type, nullptr, "to rank", dest), v.host != nullptr);
  }

  void do_recv(RecvBuffer data, int source) override {
    if (data.count == 0) return;
    use_device();
    reserve_for(data);
    const DeviceView v = view(data.data, data.bytes(), data.space, 0, false);
    mark_begin();
    MGT_NCCL_CHECK(
        ncclRecv(v.device, count_of(data.count), nccl_type(data.type), source, comm_, stream_));
    store(v);
    complete(operation("recv", data.count, data.type, nullptr, "from rank", source),
             v.host != nullptr);
  }

  void do_send_recv(SendBuffer send, int dest, RecvBuffer recv, int source) override {
    use_device();
    reserve_for(send, recv);
    const DeviceView in = view(send.data, send.bytes(), send.space, 0, true);
    const DeviceView out = view(recv.data, recv.bytes(), recv.space, aligned(send.bytes()), false);
    // Both halves in one group, so neither waits for the other to be posted.
    mark_begin();
    MGT_NCCL_CHECK(ncclGroupStart());
    if (send.count > 0)
      MGT_NCCL_CHECK(ncclSend(in.device, count_of(send.count), nccl_type(send.type), dest, comm_,
                              stream_));
    if (recv.count > 0)
      MGT_NCCL_CHECK(ncclRecv(out.device, count_of(recv.count), nccl_type(recv.type), source,
                              comm_, stream_));
    MGT_NCCL_CHECK(ncclGroupEnd());
    store(out);
    complete(operation("send_recv", recv.count, recv.type, nullptr, "from rank", source),
             in.host != nullptr || out.host != nullptr);
  }

  void do_barrier() override {
    use_device();
    reserve_scratch(kAlign);
    // NCCL has no barrier: a one-element all-reduce completes only once every rank joined.
    MGT_NCCL_CHECK(ncclAllReduce(scratch_, scratch_, 1, ncclInt64, ncclSum, comm_, stream_));
    wait("barrier");
  }

  // An operation queued on the caller's stream, watched until `done` has completed.
  struct Queued {
    cudaEvent_t done = nullptr;
    std::optional<CollectiveWatchdog::Scope> watch;
  };

  int device_;
  bool ordered_;                     // operations on device buffers stay queued on stream_
  cudaStream_t own_stream_ = nullptr;
  cudaStream_t stream_ = nullptr;    // the caller's, or own_stream_
  cudaStream_t side_stream_ = nullptr;  // started operations (made on first use)
  ncclComm_t comm_ = nullptr;
  std::unique_ptr<PeerCopyCollectives> peer_;     // over registered buffers; null: none
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  std::deque<Queued> queued_;        // oldest first
  std::vector<cudaEvent_t> spare_events_;
  static constexpr std::size_t kMaxTimed = 1 << 16;
  std::deque<Timed> timed_;          // started operations not yet taken by take_overlap_timing
  std::uint64_t first_timed_ = 0;    // serial number of timed_.front()
  std::vector<cudaEvent_t> spare_timed_;
  // The operations queued on stream_, timed there: [begin, end] events, oldest first.
  std::deque<InStream> in_stream_timed_;
  cudaEvent_t pending_begin_ = nullptr;  // mark_begin()'s, until complete() takes it
};

}  // namespace

bool nccl_available() { return true; }

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap,
                                                     const DeviceQueue& queue, const NcclOptions& options) {
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
  // Collective over the bootstrap too: the same order on every rank.
  std::unique_ptr<PeerCopyCollectives> peer =
      PeerCopyCollectives::create(bootstrap, queue.device, options.peer_copies && queue.stream != nullptr);
  return std::make_unique<NcclCommunicator>(
      GroupMembers{bootstrap.kind(), bootstrap.world_ranks(), bootstrap.rank()},
      bootstrap.watchdog(), queue.device, static_cast<cudaStream_t>(queue.stream), id, options, std::move(peer));
}

}  // namespace mgt::dist
