#include "dist/dist_testing.hpp"

#include <catch2/catch.hpp>

#include <numeric>

#include "core/error.hpp"

namespace mgt::dist_test {
namespace {

dist::DistributedRuntime* g_runtime = nullptr;

// Exactly representable in float for every group size used (sums stay below 2^24).
template <typename T>
T value(int rank, int64_t i) {
  return static_cast<T>((rank + 1) * 1000 + i % 251);
}

template <typename T>
std::vector<T> values_of(int rank, int64_t count, int64_t offset = 0) {
  std::vector<T> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = value<T>(rank, offset + i);
  return v;
}

template <typename T>
void expect_equal(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  const int64_t at = first_difference(got, want);
  INFO(what << ": " << got.size() << " elements, first difference at " << at);
  if (at >= 0 && static_cast<size_t>(at) < got.size() && static_cast<size_t>(at) < want.size())
    INFO("got " << got[static_cast<size_t>(at)] << ", expected " << want[static_cast<size_t>(at)]);
  CHECK(at == -1);
}

template <dist::CommElement T>
void check_operations(dist::Communicator& comm, TestMemory& memory, int64_t count) {
  const int n = comm.size();
  const int r = comm.rank();
  const std::string where = comm.description() + " (" + comm.transport() + ", " +
                            memory.name() + ", " + dist::element_type_name(
                                dist::element_type_of<T>()) + ", " + std::to_string(count) +
                            " elements)";

  {  // all_reduce sum and max
    TestArray<T> sum(memory, values_of<T>(r, count));
    comm.all_reduce(sum.buffer(), dist::ReduceOp::Sum);
    std::vector<T> want(static_cast<size_t>(count), T(0));
    for (int k = 0; k < n; ++k) {
      const auto v = values_of<T>(k, count);
      for (size_t i = 0; i < want.size(); ++i) want[i] += v[i];
    }
    expect_equal(sum.read(), want, "all_reduce sum on " + where);

    TestArray<T> max(memory, values_of<T>(r, count));
    comm.all_reduce(max.buffer(), dist::ReduceOp::Max);
    expect_equal(max.read(), values_of<T>(n - 1, count), "all_reduce max on " + where);
  }

  std::vector<T> gathered;
  for (int k = 0; k < n; ++k) {
    const auto v = values_of<T>(k, count);
    gathered.insert(gathered.end(), v.begin(), v.end());
  }
  {  // all_gather, out of place and in place
    TestArray<T> send(memory, values_of<T>(r, count));
    TestArray<T> recv(memory, std::vector<T>(static_cast<size_t>(count * n), T(-1)));
    comm.all_gather(send.buffer(), recv.buffer());
    expect_equal(recv.read(), gathered, "all_gather on " + where);

    std::vector<T> initial(static_cast<size_t>(count * n), T(-1));
    const auto own = values_of<T>(r, count);
    std::copy(own.begin(), own.end(), initial.begin() + r * count);
    TestArray<T> in_place(memory, initial);
    comm.all_gather(in_place.slice(r * count, count), in_place.buffer());
    expect_equal(in_place.read(), gathered, "in-place all_gather on " + where);
  }
  {  // reduce_scatter sum and max, out of place and in place
    std::vector<T> want_sum(static_cast<size_t>(count), T(0));
    for (int k = 0; k < n; ++k) {
      const auto v = values_of<T>(k, count, r * count);
      for (size_t i = 0; i < want_sum.size(); ++i) want_sum[i] += v[i];
    }
    TestArray<T> send(memory, values_of<T>(r, count * n));
    TestArray<T> recv(memory, std::vector<T>(static_cast<size_t>(count), T(-1)));
    comm.reduce_scatter(send.buffer(), recv.buffer(), dist::ReduceOp::Sum);
    expect_equal(recv.read(), want_sum, "reduce_scatter sum on " + where);
    expect_equal(send.read(), values_of<T>(r, count * n),
                 "reduce_scatter leaves its send buffer on " + where);

    comm.reduce_scatter(send.buffer(), recv.buffer(), dist::ReduceOp::Max);
    expect_equal(recv.read(), values_of<T>(n - 1, count, r * count),
                 "reduce_scatter max on " + where);

    TestArray<T> in_place(memory, values_of<T>(r, count * n));
    comm.reduce_scatter(in_place.buffer(), in_place.slice(r * count, count), dist::ReduceOp::Sum);
    const auto after = in_place.read();
    expect_equal(std::vector<T>(after.begin() + r * count, after.begin() + (r + 1) * count),
                 want_sum, "in-place reduce_scatter on " + where);
  }
  for (int root = 0; root < n; ++root) {  // broadcast from every root
    TestArray<T> data(memory, values_of<T>(r, count));
    comm.broadcast(data.buffer(), root);
    expect_equal(data.read(), values_of<T>(root, count),
                 "broadcast from " + std::to_string(root) + " on " + where);
  }
  {  // send_recv around the ring (a rank of a group of one exchanges with itself)
    const int next = (r + 1) % n;
    const int previous = (r + n - 1) % n;
    TestArray<T> send(memory, values_of<T>(r, count));
    TestArray<T> recv(memory, std::vector<T>(static_cast<size_t>(count), T(-1)));
    comm.send_recv(send.buffer(), next, recv.buffer(), previous);
    expect_equal(recv.read(), values_of<T>(previous, count), "send_recv on " + where);
    // Started, the other way round.
    TestArray<T> back(memory, std::vector<T>(static_cast<size_t>(count), T(-1)));
    dist::PendingCollective exchange = comm.start_send_recv(send.buffer(), previous, back.buffer(), next);
    exchange.wait();
    expect_equal(back.read(), values_of<T>(next, count), "started send_recv on " + where);
  }
  if (n > 1) {  // blocking send and recv around the ring: even ranks send first
    const int next = (r + 1) % n;
    const int previous = (r + n - 1) % n;
    TestArray<T> send(memory, values_of<T>(r, count));
    TestArray<T> recv(memory, std::vector<T>(static_cast<size_t>(count), T(-1)));
    if (r % 2 == 0) {
      comm.send(send.buffer(), next);
      comm.recv(recv.buffer(), previous);
    } else {
      comm.recv(recv.buffer(), previous);
      comm.send(send.buffer(), next);
    }
    expect_equal(recv.read(), values_of<T>(previous, count), "send/recv on " + where);
  }
  comm.barrier();
}

}  // namespace

dist::DistributedRuntime& runtime() {
  if (!g_runtime) throw Error("the distributed test runtime was not started");
  return *g_runtime;
}

void set_runtime(dist::DistributedRuntime* runtime) { g_runtime = runtime; }

std::vector<int> all_ranks() {
  std::vector<int> ranks(static_cast<size_t>(runtime().world_size()));
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}

void* HostMemory::allocate(size_t bytes) {
  auto block = std::make_unique<std::byte[]>(bytes);
  void* data = block.get();
  blocks_.emplace(data, std::move(block));
  return data;
}

void FakeDeviceMemory::upload(void* dst, const void* host, size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* h = static_cast<const unsigned char*>(host);
  for (size_t i = 0; i < bytes; ++i) d[i] = static_cast<unsigned char>(~h[i]);
}

void FakeDeviceMemory::download(void* host, const void* src, size_t bytes) {
  auto* h = static_cast<unsigned char*>(host);
  const auto* s = static_cast<const unsigned char*>(src);
  for (size_t i = 0; i < bytes; ++i) h[i] = static_cast<unsigned char>(~s[i]);
}

void check_all_operations(dist::Communicator& comm, TestMemory& memory) {
  for (const int64_t count : {0, 1, 7, 4099}) {
    check_operations<float>(comm, memory, count);
    check_operations<double>(comm, memory, count);
    check_operations<std::int64_t>(comm, memory, count);
  }
}

}  // namespace mgt::dist_test
