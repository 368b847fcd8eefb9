// NCCL communicators on real GPUs: one device per rank. Without NCCL in the build, or with
// fewer visible devices than ranks, the test passes with a notice (every rank decides alike).
#include <catch2/catch.hpp>

#include <numeric>

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

}  // namespace

TEST_CASE("NCCL communicators: every operation, host and device buffers, sub-groups",
          "[dist][nccl]") {
  const int world = runtime().world_size();
  if (!nccl_available()) {
    SUCCEED("built without NCCL");
    return;
  }
  const int devices = mgt::cuda::visible_device_count();
  if (devices < world) {
    WARN("NCCL tests skipped: " << devices << " CUDA devices for " << world << " ranks");
    return;
  }
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
