// The started (nonblocking) collectives that --overlap-grad-reduce and --overlap-param-gather
// use: a buffer reduced or gathered bucket by bucket, several buckets in flight at once, must
// equal the one-shot collective bit for bit — the overlapped training run's weights depend on it.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "dist/dist_testing.hpp"

using namespace mgt::dist;
using mgt::dist_test::FakeDeviceMemory;
using mgt::dist_test::HostMemory;
using mgt::dist_test::all_ranks;
using mgt::dist_test::runtime;
using mgt::dist_test::TestArray;
using mgt::dist_test::TestMemory;

namespace {

// Values of very different magnitudes, so that any other order of summation rounds differently.
std::vector<float> values_of(int rank, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  std::uint32_t state = 2654435761u * static_cast<std::uint32_t>(rank + 1);
  for (auto& x : v) {
    state = state * 1664525u + 1013904223u;
    const float unit = static_cast<float>(state >> 8) / 16777216.0f - 0.5f;
    x = (state & 7u) == 0 ? unit * 1e4f : unit;
  }
  return v;
}

// Buckets of `bucket` elements from the end of a buffer of n (the order a backward fills them).
std::vector<std::pair<int64_t, int64_t>> buckets_of(int64_t n, int64_t bucket) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t end = n; end > 0; end -= bucket) out.emplace_back(std::max<int64_t>(0, end - bucket), end);
  return out;
}

// Each rank's part of [begin, end) when rank r owns [r·per, (r + 1)·per).
std::vector<int64_t> chunk_counts(int64_t begin, int64_t end, int64_t per, int ranks) {
  std::vector<int64_t> counts(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r)
    counts[static_cast<size_t>(r)] = std::max<int64_t>(0, std::min(end, (r + 1) * per) - std::max(begin, r * per));
  return counts;
}

void check_bucketwise(Communicator& comm, TestMemory& memory) {
  const int ranks = comm.size();
  const int me = comm.rank();
  for (const int64_t per : {int64_t{1}, int64_t{750}, int64_t{40000}}) {
    const int64_t n = per * ranks;
    for (const int64_t bucket : {int64_t{1}, int64_t{333}, int64_t{5000}, n}) {
      // MPI's requests in flight at once are a bounded pool.
      if (n / bucket > 1000) continue;
      INFO(memory.name() << " memory, " << n << " elements, buckets of " << bucket);
      const std::vector<float> mine = values_of(me, n);

      TestArray<float> whole(memory, mine);
      comm.all_reduce(whole.buffer(), ReduceOp::Sum);
      TestArray<float> bucketed(memory, mine);
      std::vector<PendingCollective> pending;
      for (const auto& [b, e] : buckets_of(n, bucket))
        pending.push_back(comm.start_all_reduce(bucketed.slice(b, e - b), ReduceOp::Sum));
      for (PendingCollective& p : pending) p.wait();
      CHECK(mgt::dist_test::first_difference(whole.read(), bucketed.read()) == -1);

      TestArray<float> scattered(memory, mine);
      comm.reduce_scatter(SendBuffer(scattered.buffer()), scattered.slice(me * per, per), ReduceOp::Sum);
      TestArray<float> chunked(memory, mine);
      pending.clear();
      for (const auto& [b, e] : buckets_of(n, bucket))
        pending.push_back(comm.start_reduce_scatter_chunks(chunked.slice(b, e - b), chunk_counts(b, e, per, ranks),
                                                           ReduceOp::Sum));
      for (PendingCollective& p : pending) p.wait();
      const std::vector<float> a = scattered.read();
      const std::vector<float> c = chunked.read();
      CHECK(mgt::dist_test::first_difference(std::vector<float>(a.begin() + me * per, a.begin() + (me + 1) * per),
                                             std::vector<float>(c.begin() + me * per, c.begin() + (me + 1) * per)) == -1);

      // Each rank's own values in its shard, garbage elsewhere: the gather makes them whole.
      std::vector<float> gathered_values(static_cast<size_t>(n), 12345.0f);
      for (int64_t i = me * per; i < (me + 1) * per; ++i) gathered_values[static_cast<size_t>(i)] = -static_cast<float>(i);
      TestArray<float> gathered(memory, gathered_values);
      pending.clear();
      for (const auto& [b, e] : buckets_of(n, bucket))
        pending.push_back(comm.start_all_gather_chunks(gathered.slice(b, e - b), chunk_counts(b, e, per, ranks)));
      for (PendingCollective& p : pending) p.wait();
      const std::vector<float> g = gathered.read();
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += g[static_cast<size_t>(i)] != -static_cast<float>(i);
      CHECK(wrong == 0);
    }
  }
}

}  // namespace

TEST_CASE("bucket-wise started collectives equal the whole buffer's, bit for bit", "[dist][comm][overlap]") {
  HostMemory host;
  check_bucketwise(runtime().world(), host);
  FakeDeviceMemory device;
  auto world = runtime().split("world", {all_ranks()}, &device);
  REQUIRE(world);
  check_bucketwise(*world, device);
}

TEST_CASE("a pending collective dropped unwaited completes", "[dist][comm][overlap]") {
  Communicator& world = runtime().world();
  std::vector<double> x(100, 1.0);
  { PendingCollective p = world.start_all_reduce(host_buffer(std::span<double>(x)), ReduceOp::Sum); }
  CHECK(x[99] == static_cast<double>(world.size()));
}

TEST_CASE("chunked collectives check their chunk counts", "[dist][comm][overlap]") {
  Communicator& world = runtime().world();
  std::vector<float> x(8, 1.0f);
  std::vector<int64_t> too_few(static_cast<size_t>(world.size() + 1), 0);
  CHECK_THROWS_WITH(world.start_all_gather_chunks(host_buffer(std::span<float>(x)), too_few),
                    Catch::Contains("chunk counts for a group of"));
  std::vector<int64_t> wrong_sum(static_cast<size_t>(world.size()), 1);
  wrong_sum[0] = 100;
  CHECK_THROWS_WITH(world.start_reduce_scatter_chunks(host_buffer(std::span<float>(x)), wrong_sum, ReduceOp::Sum),
                    Catch::Contains("the chunks hold"));
}
