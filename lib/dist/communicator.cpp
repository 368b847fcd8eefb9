#include "dist/communicator.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>

#include "core/error.hpp"
#include "dist/parallel_layout.hpp"

namespace mgt::dist {
namespace {

const std::byte* begin_of(SendBuffer b) { return static_cast<const std::byte*>(b.data); }

bool overlap(SendBuffer a, SendBuffer b) {
  if (a.count == 0 || b.count == 0) return false;
  return begin_of(a) < begin_of(b) + b.bytes() && begin_of(b) < begin_of(a) + a.bytes();
}

std::string count_text(std::int64_t count) { return std::to_string(count); }

}  // namespace

const char* element_type_name(ElementType type) {
  switch (type) {
    case ElementType::Float32: return "float32";
    case ElementType::Float64: return "float64";
    case ElementType::Int64: return "int64";
    case ElementType::BFloat16: return "bfloat16";
    case ElementType::Float16: return "float16";
    case ElementType::UInt8: return "uint8";
  }
  return "unknown";
}

const char* reduce_op_name(ReduceOp op) { return op == ReduceOp::Sum ? "sum" : "max"; }

std::string describe_group(const std::string& kind, const std::vector<int>& world_ranks) {
  constexpr size_t kShown = 8;
  std::string ranks;
  if (world_ranks.size() <= kShown) {
    ranks = format_ranks(world_ranks);
  } else {
    ranks = format_ranks(std::vector<int>(world_ranks.begin(), world_ranks.begin() + kShown - 1));
    ranks.pop_back();
    ranks += ", ..., " + std::to_string(world_ranks.back()) + "] (" +
             std::to_string(world_ranks.size()) + " ranks)";
  }
  return kind + " group " + ranks;
}

Communicator::Communicator(GroupMembers members, CollectiveWatchdog* watchdog)
    : members_(std::move(members)),
      description_(describe_group(members_.kind, members_.world_ranks)),
      watchdog_(watchdog) {
  if (members_.world_ranks.empty() || members_.rank < 0 || members_.rank >= size())
    throw Error("invalid " + description_ + ": this process has rank " +
                std::to_string(members_.rank) + " in it");
}

void Communicator::fail(const char* operation, const std::string& problem) const {
  throw Error(std::string(operation) + " on the " + description_ + ": " + problem);
}

void Communicator::check_buffer(const char* operation, const char* which,
                                SendBuffer buffer) const {
  if (buffer.count < 0)
    fail(operation, std::string(which) + " buffer has a negative count (" +
                        count_text(buffer.count) + ")");
  if (buffer.count > 0 && buffer.data == nullptr)
    fail(operation, std::string(which) + " buffer of " + count_text(buffer.count) +
                        " elements has no data");
}

void Communicator::check_rank(const char* operation, const char* role, int rank) const {
  if (rank < 0 || rank >= size())
    fail(operation, std::string(role) + " " + std::to_string(rank) +
                        " is not a rank of the group (size " + std::to_string(size()) + ")");
}

void Communicator::check_disjoint(const char* operation, SendBuffer a, SendBuffer b) const {
  if (overlap(a, b)) fail(operation, "send and receive buffers overlap");
}

std::optional<CollectiveWatchdog::Scope> Communicator::watch(const char* operation,
                                                             const char* reduce,
                                                             std::int64_t count, ElementType type,
                                                             const char* peer_role,
                                                             int peer) const {
  if (!watchdog_) return std::nullopt;
  return watchdog_->watch(
      InFlightOperation{operation, reduce, &description_, count, type, peer_role, peer});
}

void Communicator::check_all_to_all(SendBuffer send, std::span<const std::int64_t> send_counts, RecvBuffer recv,
                                    std::span<const std::int64_t> recv_counts) const {
  constexpr const char* op = "all_to_all";
  check_buffer(op, "the send", send);
  check_buffer(op, "the receive", recv);
  if (send.type != recv.type)
    fail(op, std::string("send buffer holds ") + element_type_name(send.type) + ", receive buffer " +
                 element_type_name(recv.type));
  const auto check_counts = [&](const char* which, std::span<const std::int64_t> counts, std::int64_t total) {
    if (static_cast<int>(counts.size()) != size())
      fail(op, std::to_string(counts.size()) + " " + which + " counts for a group of " + std::to_string(size()));
    std::int64_t sum = 0;
    for (const std::int64_t c : counts) {
      if (c < 0) fail(op, std::string("a negative ") + which + " count (" + count_text(c) + ")");
      sum += c;
    }
    if (sum != total)
      fail(op, std::string("the ") + which + " counts sum to " + count_text(sum) + ", the buffer holds " +
                   count_text(total) + " elements");
  };
  check_counts("send", send_counts, send.count);
  check_counts("receive", recv_counts, recv.count);
  check_disjoint(op, send, recv);
}

void Communicator::all_to_all(SendBuffer send, std::span<const std::int64_t> send_counts, RecvBuffer recv,
                              std::span<const std::int64_t> recv_counts) {
  check_all_to_all(send, send_counts, recv, recv_counts);
  auto scope = watch("all_to_all", nullptr, recv.count, recv.type, nullptr, -1);
  do_all_to_all(send, send_counts, recv, recv_counts);
}

PendingCollective Communicator::start_all_to_all(SendBuffer send, std::span<const std::int64_t> send_counts,
                                                 RecvBuffer recv, std::span<const std::int64_t> recv_counts) {
  check_all_to_all(send, send_counts, recv, recv_counts);
  auto scope = watch("all_to_all", nullptr, recv.count, recv.type, nullptr, -1);
  return PendingCollective(do_start_all_to_all(send, send_counts, recv, recv_counts), std::move(scope));
}

void Communicator::do_all_to_all(SendBuffer send, std::span<const std::int64_t> send_counts, RecvBuffer recv,
                                 std::span<const std::int64_t> recv_counts) {
  const auto offsets = [](std::span<const std::int64_t> counts) {
    std::vector<std::int64_t> first(counts.size() + 1, 0);
    for (std::size_t r = 0; r < counts.size(); ++r) first[r + 1] = first[r] + counts[r];
    return first;
  };
  const std::vector<std::int64_t> send_first = offsets(send_counts), recv_first = offsets(recv_counts);
  const std::size_t element = element_size(send.type);
  for (int s = 0; s < size(); ++s) {
    const int dest = (rank() + s) % size();
    const int source = (rank() - s + size()) % size();
    SendBuffer out = send;
    out.data = begin_of(send) + static_cast<std::size_t>(send_first[static_cast<std::size_t>(dest)]) * element;
    out.count = send_counts[static_cast<std::size_t>(dest)];
    RecvBuffer in = recv;
    in.data = static_cast<std::byte*>(recv.data) +
              static_cast<std::size_t>(recv_first[static_cast<std::size_t>(source)]) * element;
    in.count = recv_counts[static_cast<std::size_t>(source)];
    do_send_recv(out, dest, in, source);
  }
}

void Communicator::all_reduce(RecvBuffer data, ReduceOp op) {
  check_buffer("all_reduce", "the", data);
  auto scope = watch("all_reduce", reduce_op_name(op), data.count, data.type, nullptr, -1);
  do_all_reduce(data, op);
}

void Communicator::check_all_gather(SendBuffer send, RecvBuffer recv) const {
  constexpr const char* op = "all_gather";
  check_buffer(op, "the send", send);
  check_buffer(op, "the receive", recv);
  if (send.type != recv.type)
    fail(op, std::string("send buffer holds ") + element_type_name(send.type) +
                 ", receive buffer " + element_type_name(recv.type));
  if (recv.count != send.count * size())
    fail(op, "receive buffer holds " + count_text(recv.count) + " elements, expected " +
                 std::to_string(size()) + " x " + count_text(send.count) + " = " +
                 count_text(send.count * size()));
  const bool in_place =
      send.data == static_cast<const std::byte*>(recv.data) + rank() * send.bytes();
  if (!in_place) check_disjoint(op, send, recv);
}

void Communicator::all_gather(SendBuffer send, RecvBuffer recv) {
  check_all_gather(send, recv);
  auto scope = watch("all_gather", nullptr, recv.count, recv.type, nullptr, -1);
  do_all_gather(send, recv);
}

PendingCollective Communicator::start_all_gather(SendBuffer send, RecvBuffer recv) {
  check_all_gather(send, recv);
  auto scope = watch("all_gather", nullptr, recv.count, recv.type, nullptr, -1);
  return PendingCollective(do_start_all_gather(send, recv), std::move(scope));
}

void Communicator::check_reduce_scatter(SendBuffer send, RecvBuffer recv) const {
  constexpr const char* op = "reduce_scatter";
  check_buffer(op, "the send", send);
  check_buffer(op, "the receive", recv);
  if (send.type != recv.type)
    fail(op, std::string("send buffer holds ") + element_type_name(send.type) +
                 ", receive buffer " + element_type_name(recv.type));
  if (send.count != recv.count * size())
    fail(op, "send buffer holds " + count_text(send.count) + " elements, expected " +
                 std::to_string(size()) + " x " + count_text(recv.count) + " = " +
                 count_text(recv.count * size()) +
                 " (pad it to a multiple of the group size)");
  const bool in_place =
      recv.data == static_cast<const std::byte*>(send.data) + rank() * recv.bytes();
  if (!in_place) check_disjoint(op, send, recv);
}

void Communicator::reduce_scatter(SendBuffer send, RecvBuffer recv, ReduceOp op_kind) {
  check_reduce_scatter(send, recv);
  auto scope = watch("reduce_scatter", reduce_op_name(op_kind), send.count, send.type, nullptr, -1);
  do_reduce_scatter(send, recv, op_kind);
}

PendingCollective Communicator::start_reduce_scatter(SendBuffer send, RecvBuffer recv, ReduceOp op_kind) {
  check_reduce_scatter(send, recv);
  auto scope = watch("reduce_scatter", reduce_op_name(op_kind), send.count, send.type, nullptr, -1);
  return PendingCollective(do_start_reduce_scatter(send, recv, op_kind), std::move(scope));
}

void Communicator::broadcast(RecvBuffer data, int root) {
  check_buffer("broadcast", "the", data);
  check_rank("broadcast", "root", root);
  auto scope = watch("broadcast", nullptr, data.count, data.type, "root", root);
  do_broadcast(data, root);
}

void Communicator::send(SendBuffer data, int dest) {
  check_buffer("send", "the", data);
  check_rank("send", "destination", dest);
  if (dest == rank()) fail("send", "a rank cannot send to itself (use send_recv)");
  auto scope = watch("send", nullptr, data.count, data.type, "to rank", dest);
  do_send(data, dest);
}

void Communicator::recv(RecvBuffer data, int source) {
  check_buffer("recv", "the", data);
  check_rank("recv", "source", source);
  if (source == rank()) fail("recv", "a rank cannot receive from itself (use send_recv)");
  auto scope = watch("recv", nullptr, data.count, data.type, "from rank", source);
  do_recv(data, source);
}

void Communicator::check_send_recv(SendBuffer send, int dest, RecvBuffer recv, int source) const {
  constexpr const char* op = "send_recv";
  check_buffer(op, "the send", send);
  check_buffer(op, "the receive", recv);
  check_rank(op, "destination", dest);
  check_rank(op, "source", source);
  check_disjoint(op, send, recv);
}

void Communicator::send_recv(SendBuffer send, int dest, RecvBuffer recv, int source) {
  check_send_recv(send, dest, recv, source);
  auto scope = watch("send_recv", nullptr, recv.count, recv.type, "from rank", source);
  do_send_recv(send, dest, recv, source);
}

PendingCollective Communicator::start_send_recv(SendBuffer send, int dest, RecvBuffer recv, int source) {
  check_send_recv(send, dest, recv, source);
  auto scope = watch("send_recv", nullptr, recv.count, recv.type, "from rank", source);
  return PendingCollective(do_start_send_recv(send, dest, recv, source), std::move(scope));
}

PendingCollective Communicator::start_swap(SendBuffer send, RecvBuffer recv) {
  if (size() != 2) fail("swap", "needs a group of two ranks, this one has " + std::to_string(size()));
  const int other = 1 - rank();
  check_send_recv(send, other, recv, other);
  if (send.count != recv.count || send.type != recv.type)
    fail("swap", "the send and receive buffers differ in size or element type");
  auto scope = watch("send_recv", nullptr, recv.count, recv.type, "from rank", other);
  return PendingCollective(do_start_swap(send, recv), std::move(scope));
}

void Communicator::check_chunks(const char* operation, RecvBuffer data,
                                std::span<const std::int64_t> counts) const {
  check_buffer(operation, "the", data);
  if (static_cast<int>(counts.size()) != size())
    fail(operation, std::to_string(counts.size()) + " chunk counts for a group of " +
                        std::to_string(size()));
  std::int64_t total = 0;
  for (const std::int64_t c : counts) {
    if (c < 0) fail(operation, "a chunk has a negative count (" + count_text(c) + ")");
    total += c;
  }
  if (total != data.count)
    fail(operation, "the chunks hold " + count_text(total) + " elements, the buffer " +
                        count_text(data.count));
}

PendingCollective Communicator::start_all_reduce(RecvBuffer data, ReduceOp op) {
  check_buffer("all_reduce", "the", data);
  auto scope = watch("all_reduce", reduce_op_name(op), data.count, data.type, nullptr, -1);
  return PendingCollective(do_start_all_reduce(data, op), std::move(scope));
}

PendingCollective Communicator::start_reduce_scatter_chunks(RecvBuffer data,
                                                            std::span<const std::int64_t> counts,
                                                            ReduceOp op) {
  check_chunks("reduce_scatter", data, counts);
  auto scope = watch("reduce_scatter", reduce_op_name(op), data.count, data.type, nullptr, -1);
  return PendingCollective(do_start_reduce_scatter_chunks(data, counts, op), std::move(scope));
}

PendingCollective Communicator::start_all_gather_chunks(RecvBuffer data,
                                                        std::span<const std::int64_t> counts) {
  check_chunks("all_gather", data, counts);
  auto scope = watch("all_gather", nullptr, data.count, data.type, nullptr, -1);
  return PendingCollective(do_start_all_gather_chunks(data, counts), std::move(scope));
}

void Communicator::barrier() {
  auto scope = watch("barrier", nullptr, -1, ElementType::Int64, nullptr, -1);
  do_barrier();
}

bool Communicator::register_buffer(RecvBuffer data) {
  check_buffer("register_buffer", "the", data);
  auto scope = watch("register_buffer", nullptr, data.count, data.type, nullptr, -1);
  return do_register_buffer(data);
}

void Communicator::unregister_buffer(RecvBuffer data) {
  check_buffer("unregister_buffer", "the", data);
  auto scope = watch("unregister_buffer", nullptr, data.count, data.type, nullptr, -1);
  do_unregister_buffer(data);
}

std::vector<std::string> all_gather_text(Communicator& group, std::string_view text, std::size_t max_bytes) {
  const std::size_t words = max_bytes / sizeof(std::int64_t) + 1;  // room for a terminating zero
  std::vector<std::int64_t> mine(words, 0);
  std::memcpy(mine.data(), text.data(), std::min(text.size(), max_bytes));
  std::vector<std::int64_t> all(words * static_cast<std::size_t>(group.size()));
  group.all_gather(std::span<const std::int64_t>(mine), std::span<std::int64_t>(all));
  std::vector<std::string> texts;
  for (std::size_t r = 0; r < static_cast<std::size_t>(group.size()); ++r) {
    const char* record = reinterpret_cast<const char*>(all.data() + r * words);
    texts.emplace_back(record, strnlen(record, words * sizeof(std::int64_t)));
  }
  return texts;
}

void OverlapTiming::add_part(const char* operation, bool beside, double seconds, double exposed) {
  auto part = std::find_if(parts.begin(), parts.end(),
                           [&](const Part& p) { return p.beside == beside && p.operation == operation; });
  if (part == parts.end()) part = parts.insert(parts.end(), Part{operation, beside});
  part->seconds += seconds;
  part->exposed_seconds += exposed;
  ++part->operations;
}

}  // namespace mgt::dist
