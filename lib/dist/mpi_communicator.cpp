#include "dist/mpi_communicator.hpp"

#include <climits>
#include <cstring>

#include "core/error.hpp"
#include "kernels/cpu/bf16.hpp"
#include "kernels/cpu/fp16.hpp"
#include "dist/host_staging.hpp"
#include "dist/mpi_check.hpp"

namespace mgt::dist {
namespace {

MPI_Datatype mpi_type(ElementType type) {
  switch (type) {
    case ElementType::Float32: return MPI_FLOAT;
    case ElementType::Float64: return MPI_DOUBLE;
    case ElementType::Int64: return MPI_INT64_T;
    case ElementType::BFloat16:
    case ElementType::Float16: return MPI_UINT16_T;  // reduced by the operations below
  }
  return MPI_DATATYPE_NULL;
}

// MPI has no bf16 or fp16: sums and maxima of such elements are computed in fp32 and rounded back
// per pair, as NCCL's reductions do.
template <ReduceOp Op, float (*kToFloat)(std::uint16_t), std::uint16_t (*kFromFloat)(float)>
void reduce_16bit(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = kToFloat(a[i]);
    const float y = kToFloat(b[i]);
    b[i] = kFromFloat(Op == ReduceOp::Sum ? x + y : (x > y || x != x ? x : y));
  }
}

// Created once, after MPI_Init (the first reduction comes later), and kept until exit like MPI's
// own operations.
template <ReduceOp Op, float (*kToFloat)(std::uint16_t), std::uint16_t (*kFromFloat)(float)>
MPI_Op created_op() {
  static const MPI_Op op = [] {
    MPI_Op created = MPI_OP_NULL;
    MGT_MPI_CHECK(MPI_Op_create(&reduce_16bit<Op, kToFloat, kFromFloat>, 1, &created));
    return created;
  }();
  return op;
}

MPI_Op mpi_op(ReduceOp op, ElementType type) {
  if (type == ElementType::BFloat16) {
    return op == ReduceOp::Sum ? created_op<ReduceOp::Sum, cpu::bf16_to_float, cpu::float_to_bf16>()
                               : created_op<ReduceOp::Max, cpu::bf16_to_float, cpu::float_to_bf16>();
  }
  if (type == ElementType::Float16) {
    return op == ReduceOp::Sum ? created_op<ReduceOp::Sum, cpu::fp16_to_float, cpu::float_to_fp16>()
                               : created_op<ReduceOp::Max, cpu::fp16_to_float, cpu::float_to_fp16>();
  }
  return op == ReduceOp::Sum ? MPI_SUM : MPI_MAX;
}

// One tag for all point-to-point traffic: operations are blocking, so messages between two
// ranks of one communicator match in the order they were sent.
constexpr int kTag = 0;

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, GroupMembers members, MemoryMover* mover,
                                 CollectiveWatchdog* watchdog)
    : Communicator(std::move(members), watchdog), comm_(comm), mover_(mover) {
  // Failures come back as codes that MGT_MPI_CHECK turns into mgt::Error.
  MGT_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

int MpiCommunicator::mpi_count(const char* operation, std::int64_t count) const {
  if (count > INT_MAX)
    throw Error(std::string(operation) + " on the " + description() + ": " +
                std::to_string(count) + " elements exceed MPI's limit of " +
                std::to_string(INT_MAX) + " per call");
  return static_cast<int>(count);
}

void MpiCommunicator::check_received(const char* operation, const MPI_Status& status,
                                     RecvBuffer recv, int source) const {
  int received = 0;
  MGT_MPI_CHECK(MPI_Get_count(&status, mpi_type(recv.type), &received));
  if (received != recv.count)
    throw Error(std::string(operation) + " on the " + description() + ": received " +
                std::to_string(received) + " " + element_type_name(recv.type) + " from rank " +
                std::to_string(source) + ", expected " + std::to_string(recv.count));
}

void MpiCommunicator::do_all_reduce(RecvBuffer data, ReduceOp op) {
  const int count = mpi_count("all_reduce", data.count);
  if (size() == 1) return;
  HostStaging host(mover_, data, true);
  MGT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, host.host(), count, mpi_type(data.type), mpi_op(op, data.type),
                              comm_));
  host.store();
}

void MpiCommunicator::do_all_gather(SendBuffer send, RecvBuffer recv) {
  const int count = mpi_count("all_gather", send.count);
  const bool in_place =
      send.data == static_cast<const std::byte*>(recv.data) + rank() * send.bytes();
  if (in_place) {
    HostStaging all(mover_, recv, true);
    MGT_MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all.host(), count,
                                mpi_type(recv.type), comm_));
    all.store();
    return;
  }
  HostStaging in(mover_, send);
  HostStaging out(mover_, recv, false);
  MGT_MPI_CHECK(MPI_Allgather(in.host(), count, mpi_type(send.type), out.host(), count,
                              mpi_type(recv.type), comm_));
  out.store();
}

void MpiCommunicator::do_reduce_scatter(SendBuffer send, RecvBuffer recv, ReduceOp op) {
  const int count = mpi_count("reduce_scatter", recv.count);
  mpi_count("reduce_scatter", send.count);
  HostStaging in(mover_, send);
  const bool in_place =
      recv.data == static_cast<const std::byte*>(send.data) + rank() * recv.bytes();
  if (!in_place) {
    HostStaging out(mover_, recv, false);
    MGT_MPI_CHECK(MPI_Reduce_scatter_block(in.host(), out.host(), count, mpi_type(recv.type),
                                           mpi_op(op, recv.type), comm_));
    out.store();
    return;
  }
  // recv lies inside send: reduce into separate memory, then copy this rank's chunk over.
  auto result = std::make_unique_for_overwrite<std::byte[]>(recv.bytes());
  MGT_MPI_CHECK(MPI_Reduce_scatter_block(in.host(), result.get(), count, mpi_type(recv.type),
                                         mpi_op(op, recv.type), comm_));
  if (recv.space == MemorySpace::Backend && mover_ && recv.count > 0)
    mover_->copy_from_host(recv.data, result.get(), recv.bytes());
  else if (recv.count > 0)
    std::memcpy(recv.data, result.get(), recv.bytes());
}

void MpiCommunicator::do_broadcast(RecvBuffer data, int root) {
  const int count = mpi_count("broadcast", data.count);
  if (size() == 1) return;
  HostStaging host(mover_, data, rank() == root);
  MGT_MPI_CHECK(MPI_Bcast(host.host(), count, mpi_type(data.type), root, comm_));
  if (rank() != root) host.store();
}

void MpiCommunicator::do_send(SendBuffer data, int dest) {
  const int count = mpi_count("send", data.count);
  HostStaging host(mover_, data);
  MGT_MPI_CHECK(MPI_Send(host.host(), count, mpi_type(data.type), dest, kTag, comm_));
}

void MpiCommunicator::do_recv(RecvBuffer data, int source) {
  const int count = mpi_count("recv", data.count);
  HostStaging host(mover_, data, false);
  MPI_Status status;
  MGT_MPI_CHECK(MPI_Recv(host.host(), count, mpi_type(data.type), source, kTag, comm_, &status));
  check_received("recv", status, data, source);
  host.store();
}

void MpiCommunicator::do_send_recv(SendBuffer send, int dest, RecvBuffer recv, int source) {
  const int send_count = mpi_count("send_recv", send.count);
  const int recv_count = mpi_count("send_recv", recv.count);
  HostStaging in(mover_, send);
  HostStaging out(mover_, recv, false);
  MPI_Status status;
  MGT_MPI_CHECK(MPI_Sendrecv(in.host(), send_count, mpi_type(send.type), dest, kTag, out.host(),
                             recv_count, mpi_type(recv.type), source, kTag, comm_, &status));
  check_received("send_recv", status, recv, source);
  out.store();
}

void MpiCommunicator::do_barrier() {
  if (size() == 1) return;
  MGT_MPI_CHECK(MPI_Barrier(comm_));
}

}  // namespace mgt::dist
