#include "dist/local_communicator.hpp"

#include <cstring>

#include "core/error.hpp"
#include "dist/host_staging.hpp"

namespace mgt::dist {

LocalCommunicator::LocalCommunicator(std::string kind, int world_rank, MemoryMover* mover,
                                     CollectiveWatchdog* watchdog)
    : Communicator(GroupMembers{std::move(kind), {world_rank}, 0}, watchdog), mover_(mover) {}

void LocalCommunicator::do_send_recv(SendBuffer send, int, RecvBuffer recv, int) {
  if (send.type != recv.type || send.count != recv.count)
    throw Error("send_recv on the " + description() + ": sending " + std::to_string(send.count) +
                " " + element_type_name(send.type) + " to itself but receiving " +
                std::to_string(recv.count) + " " + element_type_name(recv.type));
  copy(send, recv);
}

void LocalCommunicator::no_peer(const char* operation) const {
  throw Error(std::string(operation) + " on the " + description() + ": a group of one has no peer");
}

void LocalCommunicator::copy(SendBuffer from, RecvBuffer to) const {
  if (from.data == to.data || to.count == 0) return;  // in place
  // Through host memory when either side is device memory; rare enough not to need a
  // device-to-device path.
  HostStaging in(mover_, from);
  HostStaging out(mover_, to, false);
  std::memcpy(out.host(), in.host(), to.bytes());
  out.store();
}

}  // namespace mgt::dist
