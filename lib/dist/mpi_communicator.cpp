#include "dist/mpi_communicator.hpp"

#include <climits>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "dist/host_staging.hpp"
#include "dist/mpi_check.hpp"
#include "dist/mpi_rank_order_reduce_scatter.hpp"
#include "dist/mpi_reduce_types.hpp"
#include "dist/mpi_wait.hpp"

// Every operation starts MPI's nonblocking form and completes it through mpi_wait.hpp, which
// does not hold the core while it waits (MPI's blocking calls poll without pause).
namespace mgt::dist {
namespace {

// One tag for all point-to-point traffic: each operation completes before the next starts, so
// messages between two ranks of one communicator match in the order they were sent.
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
  MPI_Request request = MPI_REQUEST_NULL;
  MGT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, host.host(), count, mpi_type(data.type), mpi_op(op, data.type),
                               comm_, &request));
  MGT_MPI_CHECK(mpi_wait(&request, MPI_STATUS_IGNORE));
  host.store();
}

void MpiCommunicator::do_all_gather(SendBuffer send, RecvBuffer recv) {
  const int count = mpi_count("all_gather", send.count);
  const bool in_place =
      send.data == static_cast<const std::byte*>(recv.data) + rank() * send.bytes();
  if (in_place) {
    HostStaging all(mover_, recv, true);
    MPI_Request request = MPI_REQUEST_NULL;
    MGT_MPI_CHECK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all.host(), count, mpi_type(recv.type), comm_,
                                 &request));
    MGT_MPI_CHECK(mpi_wait(&request, MPI_STATUS_IGNORE));
    all.store();
    return;
  }
  HostStaging in(mover_, send);
  HostStaging out(mover_, recv, false);
  MPI_Request request = MPI_REQUEST_NULL;
  MGT_MPI_CHECK(MPI_Iallgather(in.host(), count, mpi_type(send.type), out.host(), count, mpi_type(recv.type), comm_,
                               &request));
  MGT_MPI_CHECK(mpi_wait(&request, MPI_STATUS_IGNORE));
  out.store();
}

void MpiCommunicator::do_reduce_scatter(SendBuffer send, RecvBuffer recv, ReduceOp op) {
  mpi_count("reduce_scatter", recv.count);
  mpi_count("reduce_scatter", send.count);
  if (recv.count == 0) return;
  HostStaging in(mover_, send);
  // This rank's chunk is reduced into separate memory, then copied to recv (which may lie
  // inside send): mpi_rank_order_reduce_scatter.hpp says why MPI's own reduce-scatter is not used.
  const std::vector<std::int64_t> counts(static_cast<std::size_t>(size()), recv.count);
  RankOrderReduceScatter exchange(comm_, rank(), in.host(), counts, recv.type, op);
  auto result = std::make_unique_for_overwrite<std::byte[]>(recv.bytes());
  exchange.finish(result.get());
  if (recv.space == MemorySpace::Backend && mover_)
    mover_->copy_from_host(recv.data, result.get(), recv.bytes());
  else
    std::memcpy(recv.data, result.get(), recv.bytes());
}

void MpiCommunicator::do_broadcast(RecvBuffer data, int root) {
  const int count = mpi_count("broadcast", data.count);
  if (size() == 1) return;
  HostStaging host(mover_, data, rank() == root);
  MPI_Request request = MPI_REQUEST_NULL;
  MGT_MPI_CHECK(MPI_Ibcast(host.host(), count, mpi_type(data.type), root, comm_, &request));
  MGT_MPI_CHECK(mpi_wait(&request, MPI_STATUS_IGNORE));
  if (rank() != root) host.store();
}

void MpiCommunicator::do_send(SendBuffer data, int dest) {
  const int count = mpi_count("send", data.count);
  HostStaging host(mover_, data);
  MPI_Request request = MPI_REQUEST_NULL;
  MGT_MPI_CHECK(MPI_Isend(host.host(), count, mpi_type(data.type), dest, kTag, comm_, &request));
  MGT_MPI_CHECK(mpi_wait(&request, MPI_STATUS_IGNORE));
}

void MpiCommunicator::do_recv(RecvBuffer data, int source) {
  const int count = mpi_count("recv", data.count);
  HostStaging host(mover_, data, false);
  MPI_Status status;
  MPI_Request request = MPI_REQUEST_NULL;
  MGT_MPI_CHECK(MPI_Irecv(host.host(), count, mpi_type(data.type), source, kTag, comm_, &request));
  MGT_MPI_CHECK(mpi_wait(&request, &status));
  check_received("recv", status, data, source);
  host.store();
}

void MpiCommunicator::do_send_recv(SendBuffer send, int dest, RecvBuffer recv, int source) {
  const int send_count = mpi_count("send_recv", send.count);
  const int recv_count = mpi_count("send_recv", recv.count);
  HostStaging in(mover_, send);
  HostStaging out(mover_, recv, false);
  // The receive first, so that the send finds it posted.
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  MPI_Status statuses[2];
  MGT_MPI_CHECK(MPI_Irecv(out.host(), recv_count, mpi_type(recv.type), source, kTag, comm_, &requests[0]));
  MGT_MPI_CHECK(MPI_Isend(in.host(), send_count, mpi_type(send.type), dest, kTag, comm_, &requests[1]));
  MGT_MPI_CHECK(mpi_wait_all(2, requests, statuses));
  check_received("send_recv", statuses[0], recv, source);
  out.store();
}

void MpiCommunicator::do_all_to_all(SendBuffer send, std::span<const std::int64_t> send_counts, RecvBuffer recv,
                                    std::span<const std::int64_t> recv_counts) {
  std::vector<int> send_mpi, send_displacements, recv_mpi, recv_displacements;
  chunk_layout("all_to_all", send_counts, send_mpi, send_displacements);
  chunk_layout("all_to_all", recv_counts, recv_mpi, recv_displacements);
  HostStaging in(mover_, send);
  HostStaging out(mover_, recv, false);
  MPI_Request request = MPI_REQUEST_NULL;
  MGT_MPI_CHECK(MPI_Ialltoallv(in.host(), send_mpi.data(), send_displacements.data(), mpi_type(send.type),
                               out.host(), recv_mpi.data(), recv_displacements.data(), mpi_type(recv.type), comm_,
                               &request));
  MGT_MPI_CHECK(mpi_wait(&request, MPI_STATUS_IGNORE));
  out.store();
}

void MpiCommunicator::do_barrier() {
  if (size() == 1) return;
  MPI_Request request = MPI_REQUEST_NULL;
  MGT_MPI_CHECK(MPI_Ibarrier(comm_, &request));
  MGT_MPI_CHECK(mpi_wait(&request, MPI_STATUS_IGNORE));
}

}  // namespace mgt::dist
