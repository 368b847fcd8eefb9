// One communicator interface for every transport (MPI over host memory, NCCL over device memory,
// a world of one without either). A communicator spans one process group; ranks are ranks within
// that group.
//
// Each public operation is non-virtual: it checks what a transport would otherwise turn into a
// hang or memory corruption (element counts against the group size, element types, peers and
// roots in range, overlapping buffers), registers the operation with the collective watchdog,
// then calls the transport's do_* hook. All ranks of the group must call a collective in the
// same order with the same counts.
//
// When an operation is complete:
//   - host buffers: when the call returns, the result is in the receive buffer and the send
//     buffer may be reused, on every transport;
//   - a compute backend's buffers, on a communicator made for that backend: the operation reads
//     what the backend's earlier operations wrote and the backend's later operations see what it
//     wrote, so callers never synchronise the backend around a communication. MPI (and a group
//     of one) stage them with the backend's own transfers, which wait for its queue, and return
//     once complete; NCCL made with the backend's DeviceQueue queues the operation on the
//     backend's stream and returns at once (stream_ordered()): the host sees the result through
//     the backend's transfers to the host, which wait for the queue like any other.
//
// Buffers come as type-erased SendBuffer/RecvBuffer (comm_buffer.hpp) or through the typed
// overloads: std::span for host memory, DeviceSpan for a backend's memory.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "dist/collective_watchdog.hpp"
#include "dist/comm_buffer.hpp"
#include "dist/pending_collective.hpp"

namespace mgt::dist {

// Who is in a group: the world rank of each group rank, and this process's group rank.
struct GroupMembers {
  std::string kind;              // "tensor-model-parallel", "world", ...
  std::vector<int> world_ranks;  // world_ranks[group rank]
  int rank = 0;                  // this process's rank in the group
};

// What the collectives of a transport that queues them on the device (NCCL) cost. The started
// ones, beside the compute on the communication stream: their time on that stream, and the part
// of it the compute stream spent waiting for them at their wait() (the rest ran hidden behind
// the compute). The others, queued on the compute stream itself: their time there, all of it in
// the compute's way.
struct OverlapTiming {
  double busy_seconds = 0.0;
  double exposed_seconds = 0.0;
  std::int64_t operations = 0;
  double in_stream_seconds = 0.0;
  std::int64_t in_stream_operations = 0;
  // The same by operation and by where it ran, in the order first seen: which collectives the
  // compute waits for.
  struct Part {
    std::string operation;  // "all_gather", "send_recv", ...
    bool beside = false;    // started beside the compute (else queued on the compute stream)
    double seconds = 0.0;
    double exposed_seconds = 0.0;
    std::int64_t operations = 0;
  };
  std::vector<Part> parts;
  void add_part(const char* operation, bool beside, double seconds, double exposed);
};

class Communicator {
public:
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  virtual ~Communicator() = default;

  int rank() const { return members_.rank; }
  int size() const { return static_cast<int>(members_.world_ranks.size()); }
  const std::vector<int>& world_ranks() const { return members_.world_ranks; }
  // "tensor-model-parallel", "world", ...
  const std::string& kind() const { return members_.kind; }
  // "tensor-model-parallel group [0, 1]", for messages.
  const std::string& description() const { return description_; }
  // The watchdog its operations report to (null: unwatched).
  CollectiveWatchdog* watchdog() const { return watchdog_; }
  // "mpi", "nccl", "local".
  virtual const char* transport() const = 0;
  // True when operations on a backend's buffers return once queued on the backend's device
  // stream, before they have run (see above); false when every operation returns complete.
  virtual bool stream_ordered() const { return false; }
  // The started collectives finished and waited for since the last call, timed with events on
  // both streams; empty where the transport does not run them beside the compute. Complete ones
  // only: the host must have waited for the compute stream past their wait() (a training step's
  // read-back of its loss does).
  virtual std::optional<OverlapTiming> take_overlap_timing() { return std::nullopt; }

  // Element-wise reduction over the group, in place.
  void all_reduce(RecvBuffer data, ReduceOp op);
  // recv = the send buffers of group ranks 0, 1, …, concatenated: recv.count = size · send.count.
  // In place when send is this rank's chunk of recv (recv + rank · send.count).
  void all_gather(SendBuffer send, RecvBuffer recv);
  // This rank's chunk of the element-wise reduction: send.count = size · recv.count, and recv
  // receives elements [rank · recv.count, (rank + 1) · recv.count) of the reduced buffer.
  // In place when recv is this rank's chunk of send.
  void reduce_scatter(SendBuffer send, RecvBuffer recv, ReduceOp op);
  // data on every rank = data on `root`.
  void broadcast(RecvBuffer data, int root);
  // Point to point with another rank of the group; counts and types must match the peer's.
  void send(SendBuffer data, int dest);
  void recv(RecvBuffer data, int source);
  // Sends to `dest` while receiving from `source` (either may be this rank): the exchange
  // between pipeline neighbours that two blocking calls could deadlock.
  void send_recv(SendBuffer send, int dest, RecvBuffer recv, int source);
  void barrier();
  // `send` in consecutive chunks of send_counts[0], send_counts[1], … elements (one per group
  // rank, summing to send.count, zeros allowed), chunk r going to group rank r; `recv` in
  // consecutive chunks of recv_counts[r] elements, chunk r what rank r sent to this rank
  // (MPI_Alltoallv). send_counts[r] here must equal recv_counts[this rank] on rank r. The token
  // exchange of expert parallelism (Megatron's all_to_all in megatron/core/tensor_parallel/
  // mappings.py).
  void all_to_all(SendBuffer send, std::span<const std::int64_t> send_counts, RecvBuffer recv,
                  std::span<const std::int64_t> recv_counts);
  void all_to_all(ConstFloatView send, std::span<const std::int64_t> send_counts, FloatView recv,
                  std::span<const std::int64_t> recv_counts) {
    all_to_all(backend_buffer(send), send_counts, backend_buffer(recv), recv_counts);
  }

  // Tells the transport that `data` (a backend's memory, from Backend::allocate_shareable) stays
  // allocated as long as this communicator (or until unregister_buffer) and that later
  // collectives work on parts of it (the gradient and weight buffers, the sequence-parallel
  // activations). NCCL between the GPUs of one machine then moves the all-reduces, reduce-
  // scatters from it, all-gathers into it and swaps within it with the copy engines
  // (nccl_peer_copy.hpp). Collective; every rank passes a buffer of the same size. Returns whether
  // the transport took it, alike on every rank (false on the others: nothing changes).
  bool register_buffer(RecvBuffer data);
  // Undoes register_buffer(data) (the same buffer) before it is freed. Collective; the backend's
  // work on it must be over.
  void unregister_buffer(RecvBuffer data);
  // Says whether the collectives started from now on have nothing computing beside them (the
  // data-parallel reductions started once the backward is over). A transport that moves
  // registered buffers on the copy engines, to leave the multiprocessors to the compute, then
  // reduces them in its kernels instead, which are faster alone (nccl_communicator.cpp). Every
  // rank sets it alike: the ranks must route each collective the same way.
  void set_alone(bool alone) { alone_ = alone; }
  bool alone() const { return alone_; }

  // ---- started now, complete at the returned handle's wait() (pending_collective.hpp) ----
  // Collectives over parts of a buffer, so that a gradient buffer can be reduced bucket by bucket
  // while the backward still writes its other buckets (Megatron's --overlap-grad-reduce). The
  // ranks must start them in the same order, interleaved with their other collectives on this
  // group in the same order too. Each element is reduced exactly as all_reduce / reduce_scatter
  // of the whole buffer would reduce it on the transports in use (MPI: MPICH's reductions are
  // element-wise, checked by the distributed tests).
  //
  // all_reduce, all_gather, reduce_scatter and send_recv, started now.
  PendingCollective start_all_reduce(RecvBuffer data, ReduceOp op);
  PendingCollective start_all_gather(SendBuffer send, RecvBuffer recv);
  PendingCollective start_reduce_scatter(SendBuffer send, RecvBuffer recv, ReduceOp op);
  PendingCollective start_send_recv(SendBuffer send, int dest, RecvBuffer recv, int source);
  // A group of two ranks swaps parts of the same buffer: this rank's `send` goes to the other
  // one's `recv`, which lies where `send` lies in this rank's copy (and the other way round). On
  // a registered buffer (register_buffer) each rank may then read the other's copy directly.
  PendingCollective start_swap(SendBuffer send, RecvBuffer recv);
  // In place over `data`, split in consecutive chunks of counts[0], counts[1], … elements (one
  // per group rank, summing to data.count, zeros allowed): afterwards this rank's chunk holds the
  // element-wise reduction of that chunk over the group; the other chunks are unspecified.
  // A reduce_scatter whose chunks may differ in size (MPI_Reduce_scatter's recvcounts).
  PendingCollective start_reduce_scatter_chunks(RecvBuffer data, std::span<const std::int64_t> counts,
                                                ReduceOp op);
  // In place over `data`, chunked as above: afterwards every rank's chunk r holds rank r's chunk
  // r (MPI_Allgatherv).
  PendingCollective start_all_gather_chunks(RecvBuffer data, std::span<const std::int64_t> counts);
  // all_to_all, started now: the token exchange of expert parallelism with work computed beside
  // it (--moe-shared-expert-overlap, --delay-wgrad-compute).
  PendingCollective start_all_to_all(SendBuffer send, std::span<const std::int64_t> send_counts, RecvBuffer recv,
                                     std::span<const std::int64_t> recv_counts);
  PendingCollective start_all_to_all(ConstFloatView send, std::span<const std::int64_t> send_counts, FloatView recv,
                                     std::span<const std::int64_t> recv_counts) {
    return start_all_to_all(backend_buffer(send), send_counts, backend_buffer(recv), recv_counts);
  }

  // ---- typed overloads: host spans ----
  template <CommElement T>
  void all_reduce(std::span<T> data, ReduceOp op) { all_reduce(host_buffer(data), op); }
  template <CommElement T>
  void all_gather(std::span<const std::type_identity_t<T>> send, std::span<T> recv) {
    all_gather(host_buffer(send), host_buffer(recv));
  }
  template <CommElement T>
  void reduce_scatter(std::span<const std::type_identity_t<T>> send, std::span<T> recv,
                      ReduceOp op) {
    reduce_scatter(host_buffer(send), host_buffer(recv), op);
  }
  template <CommElement T>
  void broadcast(std::span<T> data, int root) { broadcast(host_buffer(data), root); }
  template <CommElement T>
  void send(std::span<const T> data, int dest) { send(host_buffer(data), dest); }
  template <CommElement T>
  void send(std::span<T> data, int dest) { send(host_buffer(std::span<const T>(data)), dest); }
  template <CommElement T>
  void recv(std::span<T> data, int source) { recv(host_buffer(data), source); }
  template <CommElement T>
  void send_recv(std::span<const std::type_identity_t<T>> send_data, int dest,
                 std::span<T> recv_data, int source) {
    send_recv(host_buffer(send_data), dest, host_buffer(recv_data), source);
  }

  // ---- typed overloads: a backend's memory ----
  template <CommElement T>
  void all_reduce(DeviceSpan<T> data, ReduceOp op) { all_reduce(backend_buffer(data), op); }
  template <CommElement T>
  void all_gather(DeviceSpan<const std::type_identity_t<T>> send, DeviceSpan<T> recv) {
    all_gather(backend_buffer(send), backend_buffer(recv));
  }
  template <CommElement T>
  void reduce_scatter(DeviceSpan<const std::type_identity_t<T>> send, DeviceSpan<T> recv,
                      ReduceOp op) {
    reduce_scatter(backend_buffer(send), backend_buffer(recv), op);
  }
  template <CommElement T>
  void broadcast(DeviceSpan<T> data, int root) { broadcast(backend_buffer(data), root); }
  template <CommElement T>
  void send(DeviceSpan<const T> data, int dest) { send(backend_buffer(data), dest); }
  template <CommElement T>
  void send(DeviceSpan<T> data, int dest) { send(backend_buffer(DeviceSpan<const T>(data)), dest); }
  template <CommElement T>
  void recv(DeviceSpan<T> data, int source) { recv(backend_buffer(data), source); }
  template <CommElement T>
  void send_recv(DeviceSpan<const std::type_identity_t<T>> send_data, int dest,
                 DeviceSpan<T> recv_data, int source) {
    send_recv(backend_buffer(send_data), dest, backend_buffer(recv_data), source);
  }

  // ---- floating-point views of a backend's memory, of their own type ----
  void all_reduce(FloatView data, ReduceOp op) { all_reduce(backend_buffer(data), op); }
  void all_gather(ConstFloatView send, FloatView recv) {
    all_gather(backend_buffer(send), backend_buffer(recv));
  }
  void reduce_scatter(ConstFloatView send, FloatView recv, ReduceOp op) {
    reduce_scatter(backend_buffer(send), backend_buffer(recv), op);
  }
  void broadcast(FloatView data, int root) { broadcast(backend_buffer(data), root); }
  void send(ConstFloatView data, int dest) { send(backend_buffer(data), dest); }
  void recv(FloatView data, int source) { recv(backend_buffer(data), source); }
  void send_recv(ConstFloatView send_data, int dest, FloatView recv_data, int source) {
    send_recv(backend_buffer(send_data), dest, backend_buffer(recv_data), source);
  }

protected:
  // `watchdog` may be null (nothing watched); otherwise it must outlive the communicator.
  Communicator(GroupMembers members, CollectiveWatchdog* watchdog);

private:
  // The hooks receive checked arguments. In-place all_gather / reduce_scatter arrive as
  // described above (send inside recv, or recv inside send); other buffers never overlap.
  virtual void do_all_reduce(RecvBuffer data, ReduceOp op) = 0;
  virtual void do_all_gather(SendBuffer send, RecvBuffer recv) = 0;
  virtual void do_reduce_scatter(SendBuffer send, RecvBuffer recv, ReduceOp op) = 0;
  virtual void do_broadcast(RecvBuffer data, int root) = 0;
  virtual void do_send(SendBuffer data, int dest) = 0;
  virtual void do_recv(RecvBuffer data, int source) = 0;
  virtual void do_send_recv(SendBuffer send, int dest, RecvBuffer recv, int source) = 0;
  virtual void do_barrier() = 0;
  // By default one send_recv per pair of ranks, rank + s to rank − s for s = 0, 1, …: correct
  // on any transport; MPI and NCCL override it with their own all-to-all.
  virtual void do_all_to_all(SendBuffer send, std::span<const std::int64_t> send_counts, RecvBuffer recv,
                             std::span<const std::int64_t> recv_counts);
  virtual bool do_register_buffer(RecvBuffer /*data*/) { return false; }
  virtual void do_unregister_buffer(RecvBuffer /*data*/) {}
  // The chunked collectives (see start_reduce_scatter_chunks), complete (or queued on the
  // backend's stream, as the others) when they return.
  virtual void do_reduce_scatter_chunks(RecvBuffer data, std::span<const std::int64_t> counts,
                                        ReduceOp op) = 0;
  virtual void do_all_gather_chunks(RecvBuffer data, std::span<const std::int64_t> counts) = 0;
  // The started forms: null when the operation is complete on return. By default they run the
  // operations above (a stream-ordered transport returns at once anyway); MPI overrides them
  // with its nonblocking collectives.
  virtual std::unique_ptr<PendingTransfer> do_start_all_reduce(RecvBuffer data, ReduceOp op) {
    do_all_reduce(data, op);
    return nullptr;
  }
  virtual std::unique_ptr<PendingTransfer> do_start_all_to_all(SendBuffer send,
                                                               std::span<const std::int64_t> send_counts,
                                                               RecvBuffer recv,
                                                               std::span<const std::int64_t> recv_counts) {
    do_all_to_all(send, send_counts, recv, recv_counts);
    return nullptr;
  }
  virtual std::unique_ptr<PendingTransfer> do_start_all_gather(SendBuffer send, RecvBuffer recv) {
    do_all_gather(send, recv);
    return nullptr;
  }
  virtual std::unique_ptr<PendingTransfer> do_start_reduce_scatter(SendBuffer send, RecvBuffer recv, ReduceOp op) {
    do_reduce_scatter(send, recv, op);
    return nullptr;
  }
  virtual std::unique_ptr<PendingTransfer> do_start_send_recv(SendBuffer send, int dest, RecvBuffer recv,
                                                              int source) {
    do_send_recv(send, dest, recv, source);
    return nullptr;
  }
  virtual std::unique_ptr<PendingTransfer> do_start_swap(SendBuffer send, RecvBuffer recv) {
    return do_start_send_recv(send, 1 - rank(), recv, 1 - rank());
  }
  virtual std::unique_ptr<PendingTransfer> do_start_reduce_scatter_chunks(
      RecvBuffer data, std::span<const std::int64_t> counts, ReduceOp op) {
    do_reduce_scatter_chunks(data, counts, op);
    return nullptr;
  }
  virtual std::unique_ptr<PendingTransfer> do_start_all_gather_chunks(
      RecvBuffer data, std::span<const std::int64_t> counts) {
    do_all_gather_chunks(data, counts);
    return nullptr;
  }

  [[noreturn]] void fail(const char* operation, const std::string& problem) const;
  // The argument checks of all_gather and reduce_scatter (and their started forms).
  void check_all_gather(SendBuffer send, RecvBuffer recv) const;
  void check_reduce_scatter(SendBuffer send, RecvBuffer recv) const;
  void check_send_recv(SendBuffer send, int dest, RecvBuffer recv, int source) const;
  void check_all_to_all(SendBuffer send, std::span<const std::int64_t> send_counts, RecvBuffer recv,
                        std::span<const std::int64_t> recv_counts) const;
  void check_buffer(const char* operation, const char* which, SendBuffer buffer) const;
  void check_rank(const char* operation, const char* role, int rank) const;
  void check_disjoint(const char* operation, SendBuffer a, SendBuffer b) const;
  void check_chunks(const char* operation, RecvBuffer data,
                    std::span<const std::int64_t> counts) const;
  std::optional<CollectiveWatchdog::Scope> watch(const char* operation, const char* reduce,
                                                 std::int64_t count, ElementType type,
                                                 const char* peer_role, int peer) const;

  GroupMembers members_;
  std::string description_;
  CollectiveWatchdog* watchdog_;
  bool alone_ = false;
};

// Collective over `group`: element r is group rank r's `text`, cut to max_bytes (it travels as
// fixed-size records of int64 words).
std::vector<std::string> all_gather_text(Communicator& group, std::string_view text, std::size_t max_bytes);

// "tensor-model-parallel group [0, 1]"; long rank lists are abbreviated.
std::string describe_group(const std::string& kind, const std::vector<int>& world_ranks);

// Communicator::set_alone(alone) for a scope: the collectives started in it have nothing
// computing beside them, or not.
class StartedAlone {
public:
  StartedAlone(Communicator& group, bool alone) : group_(&group) { group_->set_alone(alone); }
  ~StartedAlone() { group_->set_alone(false); }
  StartedAlone(const StartedAlone&) = delete;
  StartedAlone& operator=(const StartedAlone&) = delete;

private:
  Communicator* group_;
};

}  // namespace mgt::dist
