#include <catch2/catch.hpp>

#include <chrono>
#include <numeric>
#include <thread>

#include "core/error.hpp"
#include "kernels/backend_factory.hpp"
#include "dist/dist_testing.hpp"
#include "dist/local_communicator.hpp"
#include "dist/process_groups.hpp"

using namespace mgt::dist;
using mgt::dist_test::check_all_operations;
using mgt::dist_test::all_ranks;
using mgt::dist_test::runtime;

TEST_CASE("every operation on the world, host buffers", "[dist][comm]") {
  Communicator& world = runtime().world();
  CHECK(world.size() == runtime().world_size());
  CHECK(world.rank() == runtime().rank());
  CHECK(std::string(world.transport()) == (runtime().uses_mpi() ? "mpi" : "local"));
  mgt::dist_test::HostMemory host;
  check_all_operations(world, host);
}

// The waits poll without pause only briefly, then sleep between polls (dist/mpi_wait.hpp): with
// the last rank late, the others' waits take that path, and every operation still completes with
// its results.
TEST_CASE("every operation on the world with one rank arriving late", "[dist][comm]") {
  Communicator& world = runtime().world();
  for (int round = 0; round < 2; ++round) {
    if (world.rank() == world.size() - 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    mgt::dist_test::HostMemory host;
    check_all_operations(world, host);
  }
}

TEST_CASE("device buffers are staged through the memory mover", "[dist][comm]") {
  mgt::dist_test::FakeDeviceMemory device;
  auto world = runtime().split("world", {all_ranks()}, &device);
  REQUIRE(world);
  check_all_operations(*world, device);
  CHECK(device.moves > 0);

  // Host buffers on the same communicator need no moves.
  mgt::dist_test::HostMemory host;
  const int64_t moves = device.moves;
  check_all_operations(*world, host);
  CHECK(device.moves == moves);
}

TEST_CASE("backend buffers without a mover are host memory", "[dist][comm]") {
  // The CPU backend's case: a DeviceSpan over host memory, no mover.
  std::vector<double> x(5, runtime().rank() + 1.0);
  runtime().world().all_reduce(mgt::DeviceSpan<double>(x.data(), 5), ReduceOp::Sum);
  const int n = runtime().world_size();
  CHECK(x == std::vector<double>(5, n * (n + 1) / 2.0));
}

TEST_CASE("bf16 and fp16 reduce-scatters sum in rank order, in fp32 rounded per pair", "[dist][comm]") {
  // What --bf16 and --fp16 runs reduce-scatter over MPI with the distributed optimizer. Rank k
  // contributes k + 1 + i / 8 to element i: sums exact in both formats, so any other rounding, or
  // an addend left out, shows.
  const auto backend = mgt::make_backend("cpu");
  Communicator& world = runtime().world();
  const int n = world.size();
  constexpr std::int64_t kChunk = 24;
  for (const mgt::FloatType type : {mgt::FloatType::kBf16, mgt::FloatType::kF16}) {
    INFO((type == mgt::FloatType::kBf16 ? "bf16" : "fp16"));
    std::vector<float> mine(static_cast<size_t>(kChunk * n));
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<float>(world.rank() + 1) + static_cast<float>(i % 8) / 8.0f;
    mgt::DeviceBuffer send(*backend, kChunk * n, type), recv(*backend, kChunk, type);
    backend->copy_from_host(mine, send.view());
    world.reduce_scatter(send.view(), recv.view(), ReduceOp::Sum);
    std::vector<float> got(static_cast<size_t>(kChunk));
    backend->copy_to_host(recv.view(), std::span<float>(got));
    for (std::int64_t i = 0; i < kChunk; ++i) {
      const auto at = static_cast<size_t>(world.rank() * kChunk + i);
      CHECK(got[static_cast<size_t>(i)] == static_cast<float>(n * (n + 1) / 2) + static_cast<float>(n) * static_cast<float>(at % 8) / 8.0f);
    }
  }
}

TEST_CASE("registering a buffer is a no-op where the transport has no use for it", "[dist][comm]") {
  std::vector<float> data(16, 1.0f);
  // MPI and a group of one answer false alike on every rank, and collectives work as before.
  CHECK_FALSE(runtime().world().register_buffer(host_buffer(std::span<float>(data))));
  LocalCommunicator alone("world", 0, nullptr, nullptr);
  CHECK_FALSE(alone.register_buffer(host_buffer(std::span<float>(data))));
  runtime().world().all_reduce(std::span<float>(data), ReduceOp::Sum);
  CHECK(data[0] == static_cast<float>(runtime().world_size()));
}

TEST_CASE("typed overloads take spans of each element type", "[dist][comm]") {
  Communicator& world = runtime().world();
  const int n = world.size();
  std::vector<std::int64_t> ids = {world.rank()};
  std::vector<std::int64_t> all(static_cast<size_t>(n));
  world.all_gather(std::span<const std::int64_t>(ids), std::span(all));
  std::vector<std::int64_t> want(static_cast<size_t>(n));
  std::iota(want.begin(), want.end(), 0);
  CHECK(all == want);

  std::vector<float> chunks(static_cast<size_t>(2 * n), 1.0f);
  std::vector<float> mine(2);
  world.reduce_scatter(std::span<const float>(chunks), std::span(mine), ReduceOp::Sum);
  CHECK(mine == std::vector<float>(2, static_cast<float>(n)));

  std::vector<double> top = {world.rank() == 0 ? 3.5 : 0.0};
  world.broadcast(std::span(top), 0);
  CHECK(top[0] == 3.5);
}

TEST_CASE("sizes, types, peers and overlaps are checked before communicating", "[dist][comm]") {
  // Every rank fails the same check locally, so nothing is left waiting.
  Communicator& world = runtime().world();
  const int n = world.size();
  std::vector<float> send(3), recv(3 * static_cast<size_t>(n) + 1);
  std::vector<double> doubles(3 * static_cast<size_t>(n));
  CHECK_THROWS_WITH(world.all_gather(std::span<const float>(send), std::span(recv)),
                    Catch::Contains("all_gather on the world group") &&
                        Catch::Contains("receive buffer holds " + std::to_string(recv.size())));
  CHECK_THROWS_WITH(world.all_gather(host_buffer(std::span<const float>(send)),
                                     host_buffer(std::span(doubles))),
                    Catch::Contains("float32") && Catch::Contains("float64"));
  // A send buffer that does not split into equal chunks (pad to a multiple of the group).
  std::vector<float> uneven(3 * static_cast<size_t>(n) + 1), out(3);
  CHECK_THROWS_WITH(world.reduce_scatter(std::span<const float>(uneven), std::span(out),
                                         ReduceOp::Sum),
                    Catch::Contains("reduce_scatter") && Catch::Contains("pad it"));
  CHECK_THROWS_WITH(world.broadcast(std::span(send), n), Catch::Contains("root " + std::to_string(n)));
  CHECK_THROWS_WITH(world.broadcast(std::span(send), -1), Catch::Contains("not a rank"));
  CHECK_THROWS_WITH(world.send(std::span(send), world.rank()), Catch::Contains("itself"));
  CHECK_THROWS_WITH(world.recv(std::span(send), n + 3), Catch::Contains("source"));
  std::vector<float> shared(8);
  CHECK_THROWS_WITH(world.send_recv(host_buffer(std::span<const float>(shared.data(), 4)), 0,
                                    host_buffer(std::span<float>(shared.data() + 2, 4)), 0),
                    Catch::Contains("overlap"));
  CHECK_THROWS_WITH(world.all_reduce(RecvBuffer{nullptr, 4, ElementType::Float32}, ReduceOp::Sum),
                    Catch::Contains("no data"));
  CHECK_THROWS_AS(world.all_reduce(RecvBuffer{send.data(), -1, ElementType::Float32}, ReduceOp::Max),
                  mgt::Error);
  world.barrier();  // still in step
}

TEST_CASE("a local communicator is a group of one", "[dist][comm]") {
  LocalCommunicator comm("embedding", 5, nullptr, nullptr);
  CHECK(comm.size() == 1);
  CHECK(comm.rank() == 0);
  CHECK(comm.world_ranks() == std::vector<int>{5});
  CHECK(comm.description() == "embedding group [5]");
  mgt::dist_test::HostMemory host;
  check_all_operations(comm, host);
  mgt::dist_test::FakeDeviceMemory device;
  LocalCommunicator staged("embedding", 5, &device, nullptr);
  check_all_operations(staged, device);
}

TEST_CASE("long rank lists are abbreviated in messages", "[dist][comm]") {
  std::vector<int> ranks(64);
  std::iota(ranks.begin(), ranks.end(), 0);
  CHECK(describe_group("world", ranks) == "world group [0, 1, 2, 3, 4, 5, 6, ..., 63] (64 ranks)");
  CHECK(describe_group("data-parallel", {1, 3}) == "data-parallel group [1, 3]");
}

TEST_CASE("collective timings add up by operation and by where they ran", "[dist][comm]") {
  mgt::dist::OverlapTiming timing;
  timing.add_part("all_gather", true, 2.0, 0.5);
  timing.add_part("all_reduce", false, 1.0, 1.0);
  timing.add_part("all_gather", true, 3.0, 0.25);
  timing.add_part("all_gather", false, 4.0, 4.0);
  REQUIRE(timing.parts.size() == 3);
  CHECK(timing.parts[0].operation == "all_gather");
  CHECK(timing.parts[0].beside);
  CHECK(timing.parts[0].seconds == 5.0);
  CHECK(timing.parts[0].exposed_seconds == 0.75);
  CHECK(timing.parts[0].operations == 2);
  CHECK(timing.parts[1].operation == "all_reduce");
  CHECK(timing.parts[2].operation == "all_gather");
  CHECK_FALSE(timing.parts[2].beside);
  CHECK(timing.parts[2].operations == 1);
}

// Rank i sends rank r a chunk of (i + r) % 3 elements, 1000·i + 10·r + j; each rank checks what
// every rank sent it, in source order. On MPI: MPI_Alltoallv; alone: the pairwise default.
TEST_CASE("all_to_all moves chunks of unequal sizes between every pair of ranks", "[dist][comm]") {
  const auto exchange = [](Communicator& comm) {
    const int n = comm.size();
    const int me = comm.rank();
    std::vector<std::int64_t> send_counts, recv_counts;
    std::vector<float> send;
    for (int r = 0; r < n; ++r) {
      send_counts.push_back((me + r) % 3);
      recv_counts.push_back((r + me) % 3);
      for (int j = 0; j < (me + r) % 3; ++j) send.push_back(static_cast<float>(1000 * me + 10 * r + j));
    }
    std::vector<float> recv(static_cast<std::size_t>(std::accumulate(recv_counts.begin(), recv_counts.end(), 0)),
                            -1.0f);
    comm.all_to_all(host_buffer(std::span<const float>(send)), send_counts, host_buffer(std::span<float>(recv)),
                    recv_counts);
    std::vector<float> expected;
    for (int r = 0; r < n; ++r)
      for (int j = 0; j < (r + me) % 3; ++j) expected.push_back(static_cast<float>(1000 * r + 10 * me + j));
    CHECK(recv == expected);
    // Started, then waited for (on MPI and alone: complete in the start).
    std::vector<float> started_recv(recv.size(), -1.0f);
    PendingCollective started = comm.start_all_to_all(host_buffer(std::span<const float>(send)), send_counts,
                                                      host_buffer(std::span<float>(started_recv)), recv_counts);
    started.wait();
    CHECK(started_recv == expected);
    // Counts that do not add up to the buffer are refused before anything moves.
    std::vector<std::int64_t> wrong = send_counts;
    wrong[0] += 1;
    CHECK_THROWS_WITH(comm.all_to_all(host_buffer(std::span<const float>(send)), wrong,
                                      host_buffer(std::span<float>(recv)), recv_counts),
                      Catch::Contains("the send counts sum to"));
  };
  exchange(runtime().world());
  LocalCommunicator alone("world", runtime().rank(), nullptr, nullptr);
  exchange(alone);
}
