// mgt-train's iterations over NCCL communicators (queued on the CUDA backend's stream, no host
// synchronisation around them) against the same iterations over MPI groups staging the device
// buffers through host memory: the same losses and gradient norms, for each layout the world
// allows (world 1: every group a group of one; 2 ranks: TP, PP, DP, DP with the distributed
// optimizer, TP with sequence parallelism; 4 ranks: TP×DP, TP×PP, TP 4). One GPU per rank; on a
// machine with fewer, the ranks' UUIDs must show the sharing that makes mgt-train keep MPI.
// Tagged [cuda]: the GPU machine runs them (tools/gpu/checks.sh, tools/gpu/multi_gpu.sh).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "dist/backend_memory_mover.hpp"
#include "dist/device_uuids.hpp"
#include "dist/dist_testing.hpp"
#include "dist/nccl_communicator.hpp"
#include "dist/process_groups.hpp"
#include "dist/transport_choice.hpp"
#include "kernels/backend_factory.hpp"
#include "kernels/cuda_device.hpp"
#include "skipped_tests.hpp"
#include "train/train_options.hpp"
#include "train/trainer.hpp"

using namespace mgt;
using mgt::dist_test::runtime;

namespace {

struct Layout {
  std::string name;
  std::vector<std::string> flags;
};

std::vector<Layout> layouts_for(int world) {
  const std::string w = std::to_string(world);
  if (world == 1) return {{"one rank", {}}};
  std::vector<Layout> layouts = {
      {"TP " + w, {"--tensor-model-parallel-size", w}},
      {"TP " + w + " sequence parallel", {"--tensor-model-parallel-size", w, "--sequence-parallel"}},
      {"PP " + w, {"--pipeline-model-parallel-size", w}},
      {"DP " + w, {}},
      {"DP " + w + " distributed optimizer", {"--use-distributed-optimizer"}},
  };
  if (world == 4) {
    layouts.push_back({"TP 2 x DP 2", {"--tensor-model-parallel-size", "2"}});
    layouts.push_back({"TP 2 x PP 2", {"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"}});
  }
  return layouts;
}

TrainOptions options_for(const Layout& layout, int world, int device) {
  std::vector<std::string> args = {
      "mgt-train", "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
      "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size", "2",
      "--global-batch-size", "8", "--lr", "1e-3", "--min-lr", "1e-4", "--lr-decay-style", "cosine",
      "--lr-warmup-iters", "1", "--train-iters", "5", "--log-interval", "1", "--eval-iters", "0",
      "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "127",
      "--make-vocab-size-divisible-by", "32", "--device", "cuda:" + std::to_string(device)};
  args.insert(args.end(), layout.flags.begin(), layout.flags.end());
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_train_options(static_cast<int>(argv.size()), argv.data(), world);
}

struct Run {
  std::vector<double> losses;
  std::vector<double> grad_norms;
};

Run train(const TrainOptions& options, Backend& backend, const dist::ProcessGroups& groups, bool pipeline) {
  std::ostringstream out;
  TrainerSettings settings;
  settings.out = &out;
  settings.backend = &backend;
  settings.ranks.world = &runtime().world();
  settings.ranks.data_parallel = &groups.get(dist::GroupKind::DataParallel);
  settings.ranks.tensor_model_parallel = &groups.get(dist::GroupKind::TensorModelParallel);
  if (pipeline) {
    settings.ranks.pipeline_model_parallel = &groups.get(dist::GroupKind::PipelineModelParallel);
    settings.ranks.model_parallel = &groups.get(dist::GroupKind::ModelParallel);
    settings.ranks.embedding = groups.find(dist::GroupKind::Embedding);
  }
  Run run;
  TrainerHooks hooks;
  hooks.after_iteration = [&run](const IterationRecord& r) {
    run.losses.push_back(r.loss);
    run.grad_norms.push_back(r.grad_norm);
  };
  train_gpt(options, settings, hooks);
  return run;
}

double largest_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(a[i]));
  return worst;
}

}  // namespace

TEST_CASE("training over NCCL on the backend's stream gives the MPI-staged run's losses", "[dist][nccl][cuda]") {
  const int world = runtime().world_size();
  const int rank = runtime().rank();
  if (!dist::nccl_available()) {
    testing::skip_test("built without NCCL");
    return;
  }
  const int devices = cuda::visible_device_count();
  if (devices == 0) {
    testing::skip_test("no CUDA device visible");
    return;
  }
  if (devices < world) {
    // Ranks sharing a GPU, as tools/gpu/parallel_one_gpu.sh runs them: NCCL would refuse the
    // groups, and the UUIDs tell mgt-train so.
    const std::vector<std::string> uuids = dist::gather_device_uuids(runtime().world(), rank % devices);
    dist::ParallelFlags flags;
    const std::optional<std::string> shared = dist::find_shared_device(dist::ParallelLayout(flags, world), uuids);
    CHECK(shared.has_value());
    testing::skip_test(std::to_string(devices) + " CUDA devices for " + std::to_string(world) + " ranks (" +
                       shared.value_or("?") + ")");
    return;
  }
  const std::unique_ptr<Backend> backend = make_cuda_backend(rank);
  {
    // One GPU per rank: the UUIDs differ.
    const std::vector<std::string> uuids = dist::gather_device_uuids(runtime().world(), rank);
    CHECK_FALSE(dist::find_shared_device(dist::ParallelLayout(dist::ParallelFlags{}, world), uuids));
  }
  dist::BackendMemoryMover mover(*backend);
  for (const Layout& layout : layouts_for(world)) {
    INFO(layout.name);
    const TrainOptions options = options_for(layout, world, rank);
    dist::ParallelFlags flags;
    flags.tensor_model_parallel_size = options.parallel.tensor_model_parallel_size;
    flags.pipeline_model_parallel_size = options.parallel.pipeline_model_parallel_size;
    const dist::ParallelLayout parallel(flags, world);
    const bool pipeline = parallel.pipeline_model_parallel_size() > 1;
    dist::ProcessGroups mpi_groups = dist::make_process_groups(runtime(), parallel, &mover);
    const Run staged = train(options, *backend, mpi_groups, pipeline);
    dist::ProcessGroups nccl_groups = dist::make_nccl_process_groups(mpi_groups, *backend->device_queue());
    CHECK(nccl_groups.get(dist::GroupKind::DataParallel).stream_ordered());
    const Run queued = train(options, *backend, nccl_groups, pipeline);
    REQUIRE(staged.losses.size() == 5);
    CHECK(queued.losses.size() == staged.losses.size());
    const double loss_difference = largest_relative_difference(staged.losses, queued.losses);
    const double norm_difference = largest_relative_difference(staged.grad_norms, queued.grad_norms);
    INFO("losses " << staged.losses.front() << " -> " << staged.losses.back() << ", largest relative difference "
                   << loss_difference << " (grad norm " << norm_difference << ")");
    CHECK(loss_difference <= 1e-5);
    CHECK(norm_difference <= 1e-4);
    CHECK(std::isfinite(staged.losses.back()));
    if (rank == 0)
      std::printf("  NCCL vs MPI-staged training, %s: loss %.6f -> %.6f, max rel diff %.2e (grad norm %.2e)\n",
                  layout.name.c_str(), staged.losses.front(), staged.losses.back(), loss_difference, norm_difference);
  }
}
