// NCCL communicators on real GPUs: one device per rank. Without NCCL in the build, or with
// fewer visible devices than ranks, the tests pass with a notice (every rank decides alike).
// Tagged [cuda]: the GPU machine runs them (tools/gpu/checks.sh, tools/gpu/multi_gpu.sh).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <random>

#include "core/error.hpp"
#include "dist/backend_memory_mover.hpp"
#include "dist/dist_testing.hpp"
#include "dist/nccl_communicator.hpp"
#include "dist/process_groups.hpp"
#include "kernels/backend_factory.hpp"
#include "kernels/cuda_device.hpp"
#include "skipped_tests.hpp"

using namespace mgt::dist;
using mgt::dist_test::runtime;

namespace {

// Device memory of a CUDA backend.
class BackendMemory final : public mgt::dist_test::TestMemory {
public:
  explicit BackendMemory(mgt::Backend& backend) : backend_(backend), mover_(backend) {}
  ~BackendMemory() override {
    for (auto& [data, bytes] : blocks_) backend_.free_bytes(data, bytes);
  }
  const char* name() const override { return "CUDA device"; }
  MemorySpace space() const override { return MemorySpace::Backend; }
  void* allocate(size_t bytes) override {
    void* data = backend_.allocate_bytes(bytes);
    blocks_.emplace(data, bytes);
    return data;
  }
  void release(void* data) override {
    backend_.free_bytes(data, blocks_.at(data));
    blocks_.erase(data);
  }
  void upload(void* dst, const void* host, size_t bytes) override {
    if (bytes) mover_.copy_from_host(dst, host, bytes);
  }
  void download(void* host, const void* src, size_t bytes) override {
    if (bytes) mover_.copy_to_host(host, src, bytes);
  }

private:
  mgt::Backend& backend_;
  BackendMemoryMover mover_;
  std::map<void*, size_t> blocks_;
};

// False, with the test case marked skipped, where NCCL cannot run a device per rank here.
bool nccl_runs_here() {
  const int world = runtime().world_size();
  if (!nccl_available()) {
    mgt::testing::skip_test("built without NCCL");
    return false;
  }
  const int devices = mgt::cuda::visible_device_count();
  if (devices < world) {
    mgt::testing::skip_test(std::to_string(devices) + " CUDA devices for " + std::to_string(world) + " ranks");
    return false;
  }
  return true;
}

// This rank's CUDA backend (device = rank) and the queue its operations run on.
struct RankBackend {
  std::unique_ptr<mgt::Backend> backend;
  mgt::DeviceQueue queue;
};

RankBackend rank_backend() {
  RankBackend r{mgt::make_cuda_backend(runtime().rank()), {}};
  const std::optional<mgt::DeviceQueue> queue = r.backend->device_queue();
  REQUIRE(queue);
  r.queue = *queue;
  return r;
}

std::vector<float> read(mgt::Backend& backend, const mgt::DeviceBuffer& buffer) {
  std::vector<float> host(static_cast<size_t>(buffer.size()));
  backend.copy_to_host(buffer.view(), std::span<float>(host));
  return host;
}

}  // namespace

TEST_CASE("NCCL communicators: every operation, host and device buffers, sub-groups",
          "[dist][nccl][cuda]") {
  const int world = runtime().world_size();
  if (!nccl_runs_here()) return;
  const int device = runtime().rank();
  auto backend = mgt::make_cuda_backend(device);
  BackendMemory gpu(*backend);
  mgt::dist_test::HostMemory host;

  auto nccl_world = make_nccl_communicator(runtime().world(), device);
  CHECK(std::string(nccl_world->transport()) == "nccl");
  CHECK(nccl_world->world_ranks() == runtime().world().world_ranks());
  mgt::dist_test::check_all_operations(*nccl_world, gpu);
  mgt::dist_test::check_all_operations(*nccl_world, host);

  // MPI staging device buffers through the backend's own transfers.
  std::vector<int> all(static_cast<size_t>(world));
  std::iota(all.begin(), all.end(), 0);
  BackendMemoryMover mover(*backend);
  auto staged_world = runtime().split("world", {all}, &mover);
  mgt::dist_test::check_all_operations(*staged_world, gpu);

  for (const auto& [tp, pp] : std::vector<std::pair<int, int>>{{2, 1}, {2, 2}}) {
    if (world % (tp * pp) != 0) continue;
    ParallelFlags flags;
    flags.tensor_model_parallel_size = tp;
    flags.pipeline_model_parallel_size = pp;
    const ParallelLayout layout(flags, world);
    ProcessGroups mpi_groups = make_process_groups(runtime(), layout);
    ProcessGroups groups = make_nccl_process_groups(mpi_groups, device);
    for (GroupKind kind : {GroupKind::TensorModelParallel, GroupKind::DataParallel,
                           GroupKind::PipelineModelParallel}) {
      CHECK(groups.get(kind).world_ranks() == mpi_groups.get(kind).world_ranks());
      mgt::dist_test::check_all_operations(groups.get(kind), gpu);
    }
  }
}

TEST_CASE("NCCL on the backend's stream: collectives ordered with its kernels, no host wait",
          "[dist][nccl][cuda]") {
  const int world = runtime().world_size();
  if (!nccl_runs_here()) return;
  const int rank = runtime().rank();
  auto [backend, queue] = rank_backend();
  CHECK(queue.device == rank);
  auto comm = make_nccl_communicator(runtime().world(), queue);
  CHECK(comm->stream_ordered());
  CHECK_FALSE(make_nccl_communicator(runtime().world(), rank)->stream_ordered());
  // The helpers' transfers are the backend's, on the same stream; host buffers stay blocking.
  BackendMemory gpu(*backend);
  mgt::dist_test::HostMemory host;
  mgt::dist_test::check_all_operations(*comm, gpu);
  mgt::dist_test::check_all_operations(*comm, host);

  // Each result feeds the next kernel with nothing but the stream between them: a collective
  // that ran before the fill, or after the scale, would leave other sums. 16 MiB per buffer, so
  // that the kernels and transfers take long enough for a race to show.
  const std::int64_t n = std::int64_t{1} << 22;
  const double ranks_sum = world * (world + 1) / 2.0;  // Σ (rank + 1)
  mgt::DeviceBuffer x(*backend, n);
  for (int round = 0; round < 3; ++round) {
    backend->fill(x.view(), static_cast<float>(rank + 1 + round));
    comm->all_reduce(x.view(), ReduceOp::Sum);
    backend->scale(x.view(), 0.5f);
    comm->all_reduce(x.view(), ReduceOp::Max);  // equal on every rank: unchanged
  }
  const std::vector<float> reduced = read(*backend, x);
  const float expected = static_cast<float>(0.5 * (ranks_sum + 2.0 * world));
  CHECK(std::count(reduced.begin(), reduced.end(), expected) == n);

  // all_gather → kernel → reduce_scatter, and a temporary freed (back to the stream's pool) while
  // the collectives reading it may still be queued.
  mgt::DeviceBuffer part(*backend, n);
  backend->fill(part.view(), static_cast<float>(rank + 1));
  {
    mgt::DeviceBuffer whole(*backend, n * world);
    comm->all_gather(mgt::ConstFloatView(part.view()), whole.view());
    backend->scale(whole.view(), 2.0f);
    comm->reduce_scatter(mgt::ConstFloatView(whole.view()), part.view(), ReduceOp::Sum);
  }
  mgt::DeviceBuffer reused(*backend, n * world);
  backend->fill(reused.view(), -1.0f);
  const std::vector<float> scattered = read(*backend, part);
  CHECK(std::count(scattered.begin(), scattered.end(), static_cast<float>(2 * world * (rank + 1))) == n);

  // bf16 activations, as a --bf16 run all-reduces them.
  mgt::DeviceBuffer half(*backend, 1024, mgt::FloatType::kBf16);
  backend->fill(half.view(), static_cast<float>(rank + 1));
  comm->all_reduce(half.view(), ReduceOp::Sum);
  const std::vector<float> halves = read(*backend, half);
  CHECK(std::count(halves.begin(), halves.end(), static_cast<float>(ranks_sum)) == 1024);

  // Expert parallelism's token exchange: rank r sends rank d (r + d) % 3 + 1 rows of 5, valued
  // 8·r + d (exact in bf16), in fp32 and bf16; each rank receives every rank's rows in rank order.
  for (const mgt::FloatType type : {mgt::FloatType::kF32, mgt::FloatType::kBf16}) {
    std::vector<std::int64_t> send_counts, recv_counts;
    std::vector<float> sent, expected;
    for (int d = 0; d < world; ++d) {
      send_counts.push_back(5 * ((rank + d) % 3 + 1));
      recv_counts.push_back(5 * ((d + rank) % 3 + 1));
      sent.insert(sent.end(), static_cast<std::size_t>(send_counts.back()), static_cast<float>(8 * rank + d));
      expected.insert(expected.end(), static_cast<std::size_t>(recv_counts.back()), static_cast<float>(8 * d + rank));
    }
    mgt::DeviceBuffer from(*backend, static_cast<std::int64_t>(sent.size()), type);
    mgt::DeviceBuffer to(*backend, static_cast<std::int64_t>(expected.size()), type);
    backend->copy_from_host(std::span<const float>(sent), from.view());
    comm->all_to_all(mgt::ConstFloatView(from.view()), send_counts, to.view(), recv_counts);
    CHECK(read(*backend, to) == expected);
    // Started beside the stream (--moe-shared-expert-overlap): it waits for the fill queued
    // before it, and the stream for it at wait().
    mgt::DeviceBuffer again(*backend, static_cast<std::int64_t>(expected.size()), type);
    backend->fill(again.view(), -1.0f);
    PendingCollective started =
        comm->start_all_to_all(mgt::ConstFloatView(from.view()), send_counts, again.view(), recv_counts);
    started.wait();
    CHECK(read(*backend, again) == expected);
  }

  // The process groups mirror the MPI ones on the same stream.
  ProcessGroups mpi_groups = make_process_groups(runtime(), ParallelLayout(ParallelFlags{}, world));
  ProcessGroups groups = make_nccl_process_groups(mpi_groups, queue);
  for (GroupKind kind : {GroupKind::TensorModelParallel, GroupKind::DataParallel,
                         GroupKind::PipelineModelParallel, GroupKind::ModelParallel}) {
    CHECK(groups.get(kind).stream_ordered());
    CHECK(std::string(groups.get(kind).transport()) == "nccl");
  }
}

TEST_CASE("NCCL started collectives run beside the backend's stream, ordered at start and wait",
          "[dist][nccl][cuda][overlap]") {
  const int world = runtime().world_size();
  if (!nccl_runs_here()) return;
  const int rank = runtime().rank();
  auto [backend, queue] = rank_backend();
  auto comm = make_nccl_communicator(runtime().world(), queue);

  // Buckets of a 16 MiB buffer filled by a kernel queued just before each start: a started
  // collective that did not wait for it, or a scale that did not wait for the collective, would
  // leave other sums. Another buffer is written on the stream meanwhile, as the backward does.
  const std::int64_t n = std::int64_t{1} << 22;
  const std::int64_t bucket = n / 4;
  const double ranks_sum = world * (world + 1) / 2.0;
  mgt::DeviceBuffer grads(*backend, n);
  mgt::DeviceBuffer other(*backend, n);
  for (int round = 0; round < 3; ++round) {
    std::vector<PendingCollective> pending;
    for (std::int64_t b = n - bucket; b >= 0; b -= bucket) {
      mgt::FloatView slice = grads.view().subspan(b, bucket);
      backend->fill(slice, static_cast<float>(rank + 1 + round));
      pending.push_back(comm->start_all_reduce(backend_buffer(slice), ReduceOp::Sum));
      backend->fill(other.view(), static_cast<float>(round));
    }
    for (PendingCollective& p : pending) p.wait();
    backend->scale(grads.view(), 0.5f);
    const std::vector<float> reduced = read(*backend, grads);
    const float expected = static_cast<float>(0.5 * (ranks_sum + round * world));
    CHECK(std::count(reduced.begin(), reduced.end(), expected) == n);
  }

  // The distributed optimizer's pair: chunked reduce-scatter, then all-gather of each rank's chunk.
  const std::int64_t per = n / world;
  std::vector<std::int64_t> counts(static_cast<size_t>(world), per);
  counts.back() += n - per * world;
  backend->fill(grads.view(), static_cast<float>(rank + 1));
  PendingCollective scatter = comm->start_reduce_scatter_chunks(backend_buffer(grads.view()), counts, ReduceOp::Sum);
  scatter.wait();
  mgt::FloatView mine = grads.view().subspan(rank * per, counts[static_cast<size_t>(rank)]);
  backend->scale(mine, 2.0f);
  PendingCollective gather = comm->start_all_gather_chunks(backend_buffer(grads.view()), counts);
  gather.wait();
  const std::vector<float> gathered = read(*backend, grads);
  CHECK(std::count(gathered.begin(), gathered.end(), static_cast<float>(2 * ranks_sum)) == n);

  // Sequence parallelism's pair: a started all-gather of each rank's slice, then a started
  // reduce-scatter, each beside a fill of another buffer on the compute stream.
  {
    const std::int64_t slice = n / world;
    mgt::DeviceBuffer local(*backend, slice);
    backend->fill(local.view(), static_cast<float>(rank + 1));
    PendingCollective gathering = comm->start_all_gather(backend_buffer(mgt::ConstFloatView(local.view())),
                                                         backend_buffer(grads.view().first(slice * world)));
    backend->fill(other.view(), 3.0f);
    gathering.wait();
    const std::vector<float> all = read(*backend, grads);
    for (int r = 0; r < world; ++r)
      CHECK(std::count(all.begin() + r * slice, all.begin() + (r + 1) * slice, static_cast<float>(r + 1)) == slice);
    PendingCollective scattering = comm->start_reduce_scatter(
        backend_buffer(mgt::ConstFloatView(grads.view().first(slice * world))), backend_buffer(local.view()),
        ReduceOp::Sum);
    backend->fill(other.view(), 4.0f);
    scattering.wait();
    const std::vector<float> mine = read(*backend, local);
    CHECK(std::count(mine.begin(), mine.end(), static_cast<float>(world * (rank + 1))) == slice);
  }

  // The pipelined reduce-scatter's exchange: a started send to the previous rank while receiving
  // from the next, beside a fill on the compute stream; the sent buffer is filled just before.
  {
    const std::int64_t slice = n / world;
    mgt::DeviceBuffer sent(*backend, slice);
    mgt::DeviceBuffer received(*backend, slice);
    backend->fill(sent.view(), static_cast<float>(rank + 1));
    PendingCollective exchange = comm->start_send_recv(backend_buffer(mgt::ConstFloatView(sent.view())),
                                                       (rank + world - 1) % world, backend_buffer(received.view()),
                                                       (rank + 1) % world);
    backend->fill(other.view(), 5.0f);
    exchange.wait();
    const std::vector<float> got = read(*backend, received);
    CHECK(std::count(got.begin(), got.end(), static_cast<float>((rank + 1) % world + 1)) == slice);
  }

  // Host memory still completes inside the start.
  std::vector<double> host(64, 1.0);
  PendingCollective on_host = comm->start_all_reduce(host_buffer(std::span<double>(host)), ReduceOp::Sum);
  CHECK_FALSE(on_host.pending());
  CHECK(host[63] == static_cast<double>(world));

  // The timings: after one all-reduce queued on the compute stream and one started beside it,
  // those two (the staged one on host memory above is not timed).
  (void)comm->take_overlap_timing();
  comm->all_reduce(backend_buffer(grads.view()), ReduceOp::Sum);
  PendingCollective beside = comm->start_all_reduce(backend_buffer(other.view()), ReduceOp::Sum);
  beside.wait();
  backend->synchronize();
  const std::optional<OverlapTiming> timing = comm->take_overlap_timing();
  REQUIRE(timing);
  CHECK(timing->operations == 1);
  CHECK(timing->in_stream_operations == 1);
  CHECK(timing->busy_seconds > 0.0);
  CHECK(timing->in_stream_seconds > 0.0);
  CHECK(timing->exposed_seconds <= timing->busy_seconds);
  // By operation: the same two, one beside the compute and one on its stream.
  REQUIRE(timing->parts.size() == 2);
  CHECK(timing->parts[0].operation == "all_reduce");
  CHECK(timing->parts[0].beside);
  CHECK(timing->parts[0].seconds == timing->busy_seconds);
  CHECK(timing->parts[0].exposed_seconds == timing->exposed_seconds);
  CHECK(timing->parts[1].operation == "all_reduce");
  CHECK_FALSE(timing->parts[1].beside);
  CHECK(timing->parts[1].seconds == timing->in_stream_seconds);
}

namespace {

// Rank r's values for a round: uniform in [-1, 1), the same on every rank that asks.
std::vector<float> rank_values(int r, int round, std::int64_t n) {
  std::mt19937 generator(static_cast<unsigned>(7919 * r + round));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = uniform(generator);
  return v;
}

// Σ over the ranks' values in rank order, in fp32: what the copy engines' reduction computes.
std::vector<float> rank_order_sum(int world, int round, std::int64_t n) {
  std::vector<float> sum = rank_values(0, round, n);
  for (int r = 1; r < world; ++r) {
    const std::vector<float> v = rank_values(r, round, n);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += v[i];
  }
  return sum;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

}  // namespace

TEST_CASE("NCCL collectives over registered buffers on the copy engines: exact rank-order sums",
          "[dist][nccl][cuda][peer-copy]") {
  const int world = runtime().world_size();
  if (!nccl_runs_here()) return;
  const int rank = runtime().rank();
  auto [backend, queue] = rank_backend();
  auto comm = make_nccl_communicator(runtime().world(), queue);

  // Several 32 MiB scratch pieces per rank's chunk, and a count no rank count divides.
  const std::int64_t n = world * (std::int64_t{9} << 20) + 7;
  mgt::DeviceBuffer grads(*backend, n, mgt::FloatType::kF32, mgt::MemorySharing::kShareable);
  if (world < 2) {
    // One rank has no peer to copy to: its collectives stay NCCL's.
    CHECK_FALSE(comm->register_buffer(backend_buffer(grads.view())));
    return;
  }
  mgt::DeviceBuffer pooled(*backend, n);  // the stream-ordered pool's: not shareable
  mgt::DeviceBuffer other(*backend, n);
  CHECK_FALSE(comm->register_buffer(backend_buffer(pooled.view())));
  REQUIRE(comm->register_buffer(backend_buffer(grads.view())));
  CHECK(comm->register_buffer(backend_buffer(grads.view().subspan(5, 1000))));  // inside: known already

  // Queued, on the whole buffer.
  backend->copy_from_host(std::span<const float>(rank_values(rank, 0, n)), grads.view());
  comm->all_reduce(backend_buffer(grads.view()), ReduceOp::Sum);
  CHECK(same_bits(read(*backend, grads), rank_order_sum(world, 0, n)));

  // Started, in uneven buckets from the end as the backward finishes them, each uploaded just
  // before its start and another buffer written on the compute stream meanwhile.
  {
    const std::vector<float> values = rank_values(rank, 1, n);
    const std::vector<std::int64_t> bounds{0, 12345, n / 3, n - 1, n};
    std::vector<PendingCollective> pending;
    for (size_t b = bounds.size() - 1; b-- > 0;) {
      const std::int64_t begin = bounds[b], size = bounds[b + 1] - begin;
      mgt::FloatView bucket = grads.view().subspan(begin, size);
      backend->copy_from_host(std::span<const float>(values).subspan(static_cast<size_t>(begin), static_cast<size_t>(size)),
                              bucket);
      pending.push_back(comm->start_all_reduce(backend_buffer(bucket), ReduceOp::Sum));
      backend->fill(other.view(), 1.0f);
    }
    for (PendingCollective& p : pending) p.wait();
    CHECK(same_bits(read(*backend, grads), rank_order_sum(world, 1, n)));
  }

  // Whether NCCL's sum `kernels` of the values of `seed` agrees with the copy engines' `engines`:
  // two ranks add the same two numbers; more add them in other orders, where each rounding is at
  // most half an ulp of a partial sum, itself at most Σ|v|, so the two differ by less than
  // 2^-20 Σ|v| (the sum itself may cancel to almost nothing, so the bound is on the operands').
  const auto agrees = [&](const std::vector<float>& engines, const std::vector<float>& kernels, int seed) {
    if (world == 2) return same_bits(engines, kernels);
    std::vector<double> magnitude(engines.size(), 0.0);
    for (int r = 0; r < world; ++r) {
      const std::vector<float> v = rank_values(r, seed, n);
      for (size_t i = 0; i < v.size(); ++i) magnitude[i] += std::abs(double(v[i]));
    }
    double worst = 0.0;
    for (size_t i = 0; i < engines.size(); ++i)
      worst = std::max(worst, std::abs(double(engines[i]) - kernels[i]) / magnitude[i]);
    return worst < std::ldexp(1.0, -20);
  };

  // NCCL's kernels on the pool's copy of the same values.
  {
    backend->copy_from_host(std::span<const float>(rank_values(rank, 2, n)), grads.view());
    backend->copy_from_host(std::span<const float>(rank_values(rank, 2, n)), pooled.view());
    comm->all_reduce(backend_buffer(grads.view()), ReduceOp::Sum);
    comm->all_reduce(backend_buffer(pooled.view()), ReduceOp::Sum);
    CHECK(agrees(read(*backend, grads), read(*backend, pooled), 2));
  }

  // The reductions of a registered buffer started alone (routed to NCCL's kernels) and the
  // others (the copy engines) give the sums. The route itself is not
  // observable here: on two ranks both give the same bits.
  {
    auto when_alone = make_nccl_communicator(runtime().world(), queue, NcclOptions{true, {}});
    mgt::DeviceBuffer tail(*backend, n, mgt::FloatType::kF32, mgt::MemorySharing::kShareable);
    REQUIRE(when_alone->register_buffer(backend_buffer(tail.view())));
    const std::vector<float> sums = rank_order_sum(world, 5, n);
    for (const bool alone : {true, false}) {
      INFO((alone ? "alone" : "beside the compute"));
      backend->copy_from_host(std::span<const float>(rank_values(rank, 5, n)), tail.view());
      when_alone->set_alone(alone);
      PendingCollective summing = when_alone->start_all_reduce(backend_buffer(tail.view()), ReduceOp::Sum);
      when_alone->set_alone(false);
      summing.wait();
      if (alone) {
        CHECK(agrees(sums, read(*backend, tail), 5));
      } else {
        CHECK(same_bits(read(*backend, tail), sums));
      }
    }
    when_alone->unregister_buffer(backend_buffer(tail.view()));
  }

  // The distributed optimizer's pair over uneven chunks, started: the reduce-scatter leaves each
  // rank its chunk's sum; the all-gather brings every rank's chunk, scaled there by its owner.
  {
    std::vector<std::int64_t> counts(static_cast<size_t>(world));
    std::int64_t used = 0;
    for (int r = 0; r < world; ++r) used += counts[static_cast<size_t>(r)] = n / (world + 1) + 977 * r;
    const std::int64_t offset = 3;  // a bucket that starts inside the buffer
    mgt::FloatView part = grads.view().subspan(offset, used);
    backend->copy_from_host(std::span<const float>(rank_values(rank, 3, n)), grads.view());
    PendingCollective scatter = comm->start_reduce_scatter_chunks(backend_buffer(part), counts, ReduceOp::Sum);
    backend->fill(other.view(), 2.0f);
    scatter.wait();
    const std::vector<float> sums = rank_order_sum(world, 3, n);
    std::int64_t begin = offset;
    for (int r = 0; r < rank; ++r) begin += counts[static_cast<size_t>(r)];
    const std::int64_t own = counts[static_cast<size_t>(rank)];
    const std::vector<float> after = read(*backend, grads);
    CHECK(same_bits(std::span<const float>(after).subspan(static_cast<size_t>(begin), static_cast<size_t>(own)),
                    std::span<const float>(sums).subspan(static_cast<size_t>(begin), static_cast<size_t>(own))));

    backend->scale(grads.view().subspan(begin, own), static_cast<float>(rank + 2));
    PendingCollective gather = comm->start_all_gather_chunks(backend_buffer(part), counts);
    gather.wait();
    const std::vector<float> gathered = read(*backend, grads);
    std::int64_t at = offset;
    bool all_chunks = true;
    for (int r = 0; r < world; ++r) {
      for (std::int64_t i = at; i < at + counts[static_cast<size_t>(r)]; ++i)
        all_chunks = all_chunks && gathered[static_cast<size_t>(i)] == sums[static_cast<size_t>(i)] * static_cast<float>(r + 2);
      at += counts[static_cast<size_t>(r)];
    }
    CHECK(all_chunks);
  }

  // The one-shot forms of the distributed optimizer (buffer_shards.cpp): in-place reduce-scatter
  // and all-gather of even chunks.
  {
    const std::int64_t per = n / world;
    backend->copy_from_host(std::span<const float>(rank_values(rank, 4, n)), grads.view());
    mgt::FloatView mine = grads.view().subspan(rank * per, per);
    comm->reduce_scatter(mgt::ConstFloatView(grads.view().first(per * world)), mine, ReduceOp::Sum);
    const std::vector<float> sums = rank_order_sum(world, 4, n);
    const std::vector<float> after = read(*backend, grads);
    CHECK(same_bits(std::span<const float>(after).subspan(static_cast<size_t>(rank * per), static_cast<size_t>(per)),
                    std::span<const float>(sums).subspan(static_cast<size_t>(rank * per), static_cast<size_t>(per))));
    comm->all_gather(mgt::ConstFloatView(mine), grads.view().first(per * world));
    const std::vector<float> gathered = read(*backend, grads);
    CHECK(same_bits(std::span<const float>(gathered).first(static_cast<size_t>(per * world)),
                    std::span<const float>(sums).first(static_cast<size_t>(per * world))));
  }

  // bf16: integers small enough that every sum is exact, summed in fp32 and rounded once.
  {
    const std::int64_t m = 3 * (std::int64_t{1} << 20) + 1;
    mgt::DeviceBuffer halves(*backend, m, mgt::FloatType::kBf16, mgt::MemorySharing::kShareable);
    REQUIRE(comm->register_buffer(backend_buffer(halves.view())));
    std::vector<float> mine(static_cast<size_t>(m)), expected(static_cast<size_t>(m), 0.0f);
    for (std::int64_t i = 0; i < m; ++i) {
      for (int r = 0; r < world; ++r) {
        const float v = static_cast<float>((i * 7 + r * 13) % 33 - 16);
        expected[static_cast<size_t>(i)] += v;
        if (r == rank) mine[static_cast<size_t>(i)] = v;
      }
    }
    backend->copy_from_host(std::span<const float>(mine), halves.view());
    PendingCollective summing = comm->start_all_reduce(backend_buffer(halves.view()), ReduceOp::Sum);
    summing.wait();
    std::vector<float> got(static_cast<size_t>(m));
    backend->copy_to_host(mgt::ConstFloatView(halves.view()), std::span<float>(got));
    CHECK(got == expected);
  }

  // Timed as started collectives.
  backend->synchronize();
  const std::optional<OverlapTiming> timing = comm->take_overlap_timing();
  REQUIRE(timing);
  CHECK(timing->operations > 0);
  CHECK(timing->exposed_seconds <= timing->busy_seconds);

  // Turned off: nothing is registered, and NCCL's kernels run as before.
  auto kernels_only = make_nccl_communicator(runtime().world(), queue, NcclOptions{false, {}});
  CHECK_FALSE(kernels_only->register_buffer(backend_buffer(grads.view())));
}

TEST_CASE("NCCL: sequence parallelism's collectives over registered buffers on the copy engines",
          "[dist][nccl][cuda][peer-copy]") {
  const int world = runtime().world_size();
  if (!nccl_runs_here()) return;
  if (world < 2) {
    mgt::testing::skip_test("sequence parallelism needs 2 ranks or more");
    return;
  }
  const int rank = runtime().rank();
  auto [backend, queue] = rank_backend();
  auto comm = make_nccl_communicator(runtime().world(), queue);
  // A whole-sequence buffer (shared) and this rank's rows elsewhere (the stream-ordered pool's).
  const std::int64_t per = (std::int64_t{3} << 20) + 5;
  mgt::DeviceBuffer whole(*backend, per * world, mgt::FloatType::kF32, mgt::MemorySharing::kShareable);
  mgt::DeviceBuffer local(*backend, per);
  REQUIRE(comm->register_buffer(backend_buffer(whole.view())));
  const auto slice = [&](const std::vector<float>& v, int r) {
    return std::vector<float>(v.begin() + r * per, v.begin() + (r + 1) * per);
  };

  // All-gather from another buffer into the registered one, started and blocking.
  for (const bool started : {true, false}) {
    backend->copy_from_host(std::span<const float>(rank_values(rank, 10, per)), local.view());
    backend->fill(whole.view(), -7.0f);
    if (started) {
      PendingCollective gather = comm->start_all_gather(backend_buffer(mgt::ConstFloatView(local.view())),
                                                        backend_buffer(whole.view()));
      gather.wait();
    } else {
      comm->all_gather(mgt::ConstFloatView(local.view()), whole.view());
    }
    const std::vector<float> got = read(*backend, whole);
    for (int r = 0; r < world; ++r) CHECK(same_bits(slice(got, r), rank_values(r, 10, per)));
  }

  // Reduce-scatter from the registered buffer into another one; the registered one is kept.
  {
    const std::vector<float> mine = rank_values(rank, 11, per * world);
    backend->copy_from_host(std::span<const float>(mine), whole.view());
    PendingCollective scatter = comm->start_reduce_scatter(backend_buffer(mgt::ConstFloatView(whole.view())),
                                                           backend_buffer(local.view()), ReduceOp::Sum);
    scatter.wait();
    CHECK(same_bits(read(*backend, local), slice(rank_order_sum(world, 11, per * world), rank)));
    CHECK(same_bits(read(*backend, whole), mine));
  }

  // Two ranks swap blocks: each receives, into its own block, the other's copy of that block.
  if (world == 2) {
    backend->copy_from_host(std::span<const float>(rank_values(rank, 12, per * 2)), whole.view());
    const int other = 1 - rank;
    PendingCollective swap = comm->start_swap(backend_buffer(mgt::ConstFloatView(whole.view().subspan(other * per, per))),
                                              backend_buffer(whole.view().subspan(rank * per, per)));
    swap.wait();
    const std::vector<float> got = read(*backend, whole);
    CHECK(same_bits(slice(got, rank), slice(rank_values(other, 12, per * 2), rank)));
    CHECK(same_bits(slice(got, other), slice(rank_values(rank, 12, per * 2), other)));
  }

  // Taken back: the same collectives then run in NCCL's kernels, with the same results.
  comm->unregister_buffer(backend_buffer(whole.view()));
  backend->copy_from_host(std::span<const float>(rank_values(rank, 13, per)), local.view());
  comm->all_gather(mgt::ConstFloatView(local.view()), whole.view());
  const std::vector<float> got = read(*backend, whole);
  for (int r = 0; r < world; ++r) CHECK(same_bits(slice(got, r), rank_values(r, 13, per)));
  CHECK(comm->register_buffer(backend_buffer(whole.view())));
}

// Not a test: timings of the copy engines' all-reduce against NCCL's on 1 GiB, whole and in
// 40M-element buckets ([.] keeps it out of the default run).
TEST_CASE("peer-copy timings", "[.][peer-copy-timing]") {
  const int world = runtime().world_size();
  if (!nccl_runs_here()) return;
  auto [backend, queue] = rank_backend();
  auto comm = make_nccl_communicator(runtime().world(), queue);
  const std::int64_t n = std::int64_t{1} << 28;
  mgt::DeviceBuffer shared(*backend, n, mgt::FloatType::kF32, mgt::MemorySharing::kShareable);
  mgt::DeviceBuffer pooled(*backend, n);
  REQUIRE(comm->register_buffer(backend_buffer(shared.view())));
  backend->fill(shared.view(), 1.0f);
  backend->fill(pooled.view(), 1.0f);
  const auto time = [&](const char* name, const std::function<void()>& run) {
    run();
    backend->synchronize();
    comm->barrier();
    const auto begin = std::chrono::steady_clock::now();
    for (int i = 0; i < 5; ++i) run();
    backend->synchronize();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count() / 5;
    if (runtime().rank() == 0) std::printf("%-50s %8.2f ms  %6.1f GB/s algbw\n", name, ms, n * 4 / ms / 1e6);
  };
  time("NCCL all_reduce 1 GiB", [&] { comm->all_reduce(backend_buffer(pooled.view()), ReduceOp::Sum); });
  time("copy engines all_reduce 1 GiB", [&] { comm->all_reduce(backend_buffer(shared.view()), ReduceOp::Sum); });
  const std::int64_t bucket = 40'000'000;
  const auto buckets = [&](mgt::DeviceBuffer& b) {
    std::vector<PendingCollective> pending;
    for (std::int64_t at = 0; at < n; at += bucket)
      pending.push_back(comm->start_all_reduce(backend_buffer(b.view().subspan(at, std::min(bucket, n - at))), ReduceOp::Sum));
    for (PendingCollective& p : pending) p.wait();
  };
  time("NCCL all_reduce 1 GiB in 40M buckets", [&] { buckets(pooled); });
  time("copy engines all_reduce 1 GiB in 40M buckets", [&] { buckets(shared); });
  const std::vector<std::int64_t> counts(static_cast<size_t>(world), n / world);
  time("copy engines reduce_scatter_chunks 1 GiB",
       [&] { comm->start_reduce_scatter_chunks(backend_buffer(shared.view()), counts, ReduceOp::Sum).wait(); });
  time("copy engines all_gather_chunks 1 GiB",
       [&] { comm->start_all_gather_chunks(backend_buffer(shared.view()), counts).wait(); });
  time("NCCL barrier", [&] { comm->barrier(); });
}
