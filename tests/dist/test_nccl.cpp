// NCCL communicators on real GPUs: one device per rank. Without NCCL in the build, or with
// fewer visible devices than ranks, the tests pass with a notice (every rank decides alike).
// Tagged [cuda]: the GPU machine runs them (tools/gpu/checks.sh, tools/gpu/multi_gpu.sh).
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <numeric>
#include <optional>

#include "core/error.hpp"
#include "dist/backend_memory_mover.hpp"
#include "dist/dist_testing.hpp"
#include "dist/nccl_communicator.hpp"
#include "dist/process_groups.hpp"
#include "kernels/backend_factory.hpp"
#include "kernels/cuda/device.hpp"

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

// False, with a notice, where NCCL cannot run a device per rank here.
bool nccl_runs_here() {
  const int world = runtime().world_size();
  if (!nccl_available()) {
    SUCCEED("built without NCCL");
    return false;
  }
  const int devices = mgt::cuda::visible_device_count();
  if (devices < world) {
    WARN("NCCL tests skipped: " << devices << " CUDA devices for " << world << " ranks");
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
}

TEST_CASE("NCCL all-gathers and reduce-scatters on the copy engines give the kernels' results",
          "[dist][nccl][cuda][copy-engine]") {
  const int world = runtime().world_size();
  if (!nccl_runs_here()) return;
  const int rank = runtime().rank();
  auto [backend, queue] = rank_backend();
  std::unique_ptr<Communicator> comm;
  try {
    comm = make_nccl_communicator(runtime().world(), queue, NcclOptions{0, true});
  } catch (const mgt::Error& e) {
    // Every rank loads the same NCCL, so every rank skips alike.
    REQUIRE(std::string(e.what()).find("need NCCL 2.28") != std::string::npos);
    WARN("copy-engine collectives skipped: " << e.what());
    return;
  }
  BackendMemory gpu(*backend);
  mgt::dist_test::check_all_operations(*comm, gpu);

  // Growing sizes (the windows grow and register again), queued and started, each slice filled
  // by a kernel just before: a gather that did not wait for it would bring other values.
  for (const std::int64_t slice : {std::int64_t{1} << 10, std::int64_t{1} << 20, std::int64_t{3} << 20}) {
    mgt::DeviceBuffer local(*backend, slice);
    mgt::DeviceBuffer whole(*backend, slice * world);
    for (const bool started : {false, true}) {
      backend->fill(local.view(), static_cast<float>(rank + 1) + (started ? 0.5f : 0.0f));
      if (started) {
        PendingCollective gathering = comm->start_all_gather(backend_buffer(mgt::ConstFloatView(local.view())),
                                                             backend_buffer(whole.view()));
        gathering.wait();
      } else {
        comm->all_gather(mgt::ConstFloatView(local.view()), whole.view());
      }
      const std::vector<float> all = read(*backend, whole);
      for (int r = 0; r < world; ++r)
        CHECK(std::count(all.begin() + r * slice, all.begin() + (r + 1) * slice,
                         static_cast<float>(r + 1) + (started ? 0.5f : 0.0f)) == slice);
    }
  }

  // Reduce-scatters in fp32 and bf16, queued and started: rank r's whole holds r + 1 + j in chunk
  // j, so chunk j sums to Σ (r + 1) + world · j, the same on every rank and different per chunk.
  const double ranks_sum = world * (world + 1) / 2.0;
  for (const mgt::FloatType type : {mgt::FloatType::kF32, mgt::FloatType::kBf16}) {
    for (const std::int64_t slice : {std::int64_t{1} << 10, std::int64_t{5} << 20}) {
      mgt::DeviceBuffer whole(*backend, slice * world, type);
      mgt::DeviceBuffer mine(*backend, slice, type);
      for (const bool started : {false, true}) {
        INFO((type == mgt::FloatType::kBf16 ? "bf16" : "fp32") << ", " << slice << " per rank"
                                                                 << (started ? ", started" : ""));
        for (int j = 0; j < world; ++j)
          backend->fill(whole.view().subspan(j * slice, slice), static_cast<float>(rank + 1 + j));
        if (started) {
          PendingCollective scattering = comm->start_reduce_scatter(
              backend_buffer(mgt::ConstFloatView(whole.view())), backend_buffer(mine.view()), ReduceOp::Sum);
          scattering.wait();
        } else {
          comm->reduce_scatter(mgt::ConstFloatView(whole.view()), mine.view(), ReduceOp::Sum);
        }
        const std::vector<float> sums = read(*backend, mine);
        CHECK(std::count(sums.begin(), sums.end(), static_cast<float>(ranks_sum + world * rank)) == slice);
      }
    }
  }
}
