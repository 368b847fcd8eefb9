#include "train/train_launch.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/program_main.hpp"
#include "dist/backend_memory_mover.hpp"
#include "dist/device_uuids.hpp"
#include "dist/launch_environment.hpp"
#include "dist/distributed_runtime.hpp"
#include "dist/nccl_communicator.hpp"
#include "dist/node_membership.hpp"
#include "dist/parallel_layout.hpp"
#include "dist/process_groups.hpp"
#include "dist/transport_choice.hpp"
#include "kernels/backend_factory.hpp"
#include "kernels/cuda_device.hpp"
#include "train/command_line_agreement.hpp"
#include "train/layout_planner.hpp"
#include "train/train_memory.hpp"
#include "train/rank_agreement.hpp"
#include "train/rank_backend_options.hpp"
#include "train/train_options.hpp"
#include "train/trainer.hpp"

namespace mgt {

namespace {

dist::ParallelFlags parallel_flags(const TrainOptions& o) {
  dist::ParallelFlags f;
  f.tensor_model_parallel_size = o.parallel.tensor_model_parallel_size;
  f.pipeline_model_parallel_size = o.parallel.pipeline_model_parallel_size;
  f.distributed_timeout_minutes = o.parallel.distributed_timeout_minutes;
  f.context_parallel_size = o.parallel.context_parallel_size;
  f.expert_model_parallel_size = o.moe.expert_model_parallel_size;
  f.expert_tensor_parallel_size = o.moe.expert_tensor_parallel_size.value_or(0);
  return f;
}

// One GPU per rank, as Megatron's torch.cuda.set_device(local_rank): with several ranks, "cuda"
// and "auto" (when a GPU is visible) mean device local rank mod the visible devices. A device
// given by number is taken as it is.
std::string device_of_rank(const std::string& device, int local_rank) {
  const int gpus = cuda::visible_device_count();
  if (device == "cuda" || (device == "auto" && gpus > 0))
    return "cuda:" + std::to_string(local_rank % std::max(1, gpus));
  return device;
}

// NCCL or MPI for the groups (dist/transport_choice.hpp), the same on every rank. Collective over
// the world.
dist::TransportChoice choose_transport(const TrainOptions& options, dist::DistributedRuntime& runtime,
                                       const dist::ParallelLayout& layout, const Backend& backend) {
  dist::TransportInputs in;
  in.requested = dist::parse_distributed_backend(options.parallel.distributed_backend);
  in.world_size = runtime.world_size();
  in.nccl_built = dist::nccl_available();
  const std::optional<DeviceQueue> queue = backend.device_queue();
  if (in.world_size == 1) return dist::choose_transport(in);
  // NCCL needs every rank on a GPU: agreed, so that all or none gather the devices below.
  std::int64_t cpu_ranks = queue ? 0 : 1;
  runtime.world().all_reduce(std::span<std::int64_t>(&cpu_ranks, 1), dist::ReduceOp::Sum);
  in.device_backend = cpu_ranks == 0;
  if (dist::wants_nccl(in))
    in.shared_device = dist::find_shared_device(layout, dist::gather_device_uuids(runtime.world(), queue->device));
  return dist::choose_transport(in);
}

}  // namespace

int run_training_program(int argc, const char* const* argv) {
  // Every rank reads the same command line and finds the same notes and mistakes in it; before
  // MPI starts, the launcher's numbering says which process reports them for the job.
  const bool reports = dist::read_launch_environment().launcher_rank == 0;
  TrainOptions options;
  TrainOptions unvalidated;  // as parsed: --dry-run's layout planner varies the layout flags of it
  dist::ParallelFlags flags;
  try {
    options = read_train_options(argc, argv, reports);
    unvalidated = options;
    if (options.show_help) {
      if (reports) std::cout << train_options_help();
      return kExitOk;
    }
    flags = parallel_flags(options);
    dist::validate_parallel_flags(flags);
  } catch (const Error& e) {
    if (e.exit_code() != kExitUsage || reports) throw;
    return e.exit_code();
  }
  // MPI under a launcher, nothing for a lone process; from here on log lines carry the rank.
  std::unique_ptr<dist::DistributedRuntime> runtime = dist::DistributedRuntime::start(flags.distributed_timeout());
  const bool chief = runtime->rank() == 0;
  if (!chief) log::set_min_level(log::Level::Warning);
  if (chief) print_ignored_flags("mgt-train", options.ignored_flags);
  int world_size = runtime->world_size();  // --dry-run --world-size N: N
  try {
    require_same_command_line(runtime->world(), argc, argv);
    // Its notes and warnings (the legacy --split, sequence parallelism turned off) concern the
    // job's flags: rank 0 gives them, as Megatron's validate_args prints on rank 0.
    if (!chief) log::set_min_level(log::Level::Error);
    world_size = planned_world_size(options, runtime->world_size());
    validate_train_options(options, world_size);
    if (!chief) log::set_min_level(log::Level::Warning);
  } catch (const Error& e) {
    if (e.exit_code() != kExitUsage) throw;
    // Every rank finds the same mistake in the same flags: rank 0 says it once, as the program
    // reports errors, and every rank leaves MPI in order with the usage status.
    if (chief) print_program_error("mgt-train", e.what());
    return e.exit_code();
  }
  if (options.dry_run) {
    if (!chief) return kExitOk;
    const bool launched = runtime->world_size() > 1 || dist::read_launch_environment().has_process_manager;
    const std::optional<LayoutPlan> plan = dry_run_layout_plan(unvalidated, options, world_size, launched, std::cerr);
    return run_train_dry_run(options, std::cout, std::cerr, plan ? &*plan : nullptr);
  }

  // Which ranks share a node, as the launcher says: each rank takes the GPU of its place on its
  // node, and the copy-engine collectives stay within a node (--simulated-nodes splits further).
  dist::NodeMembership nodes;
  if (runtime->world_size() > 1) {
    nodes = dist::find_node_membership(runtime->world());
    options.device = device_of_rank(options.device, nodes.local_rank(runtime->rank()));
    nodes = dist::split_into_simulated_nodes(nodes, static_cast<int>(options.parallel.simulated_nodes));
    if (chief) log::info(dist::node_membership_line(nodes));
  }
  try {
    std::unique_ptr<Backend> backend;
    const BackendOptions backend_options = rank_backend_options(options.logging, runtime->rank());
    run_on_all_ranks_or_none(runtime->world(), "starting the compute backend",
                             [&] { backend = make_backend(options.device, backend_options); });
    // The groups move the backend's buffers: an MPI group stages device memory through the host
    // with the backend's own copies (the CPU backend's memory is host memory already); NCCL
    // groups, set up over the MPI ones, queue the operations on the backend's stream.
    dist::BackendMemoryMover mover(*backend);
    const dist::ParallelLayout layout(flags, runtime->world_size());
    dist::ProcessGroups mpi_groups = dist::make_process_groups(*runtime, layout, &mover);
    const dist::TransportChoice transport = choose_transport(options, *runtime, layout, *backend);
    if (chief && !transport.line.empty()) log::info(transport.line);
    dist::ProcessGroups nccl_groups;
    if (transport.nccl) {
      dist::CommunicationOptions communication;
      communication.data_parallel = dist::parse_data_parallel_collectives(options.parallel.dp_collectives);
      communication.node_of_world_rank = nodes.node_of_rank;
      nccl_groups = dist::make_nccl_process_groups(mpi_groups, *backend->device_queue(), communication);
    }
    const dist::ProcessGroups& groups = transport.nccl ? nccl_groups : mpi_groups;

    TrainerSettings settings;
    settings.backend = backend.get();
    if (const char* job = dist::launcher_variable("SLURM_JOB_ID")) settings.job_id = job;
    settings.ranks.world = &runtime->world();
    settings.ranks.data_parallel = &groups.get(dist::GroupKind::DataParallel);
    settings.ranks.tensor_model_parallel = &groups.get(dist::GroupKind::TensorModelParallel);
    if (layout.pipeline_model_parallel_size() > 1) {
      settings.ranks.pipeline_model_parallel = &groups.get(dist::GroupKind::PipelineModelParallel);
      settings.ranks.model_parallel = &groups.get(dist::GroupKind::ModelParallel);
      settings.ranks.embedding = groups.find(dist::GroupKind::Embedding);
    }
    if (layout.context_parallel_size() > 1) {
      settings.ranks.context_parallel = &groups.get(dist::GroupKind::ContextParallel);
      settings.ranks.data_parallel_with_context = &groups.get(dist::GroupKind::DataParallelWithContext);
    }
    if (options.moe.enabled() && layout.separate_expert_grid()) {
      settings.ranks.expert_model_parallel = &groups.get(dist::GroupKind::ExpertModelParallel);
      settings.ranks.expert_data_parallel = &groups.get(dist::GroupKind::ExpertDataParallel);
      settings.ranks.expert_tensor_model_pipeline = &groups.get(dist::GroupKind::ExpertTensorModelPipeline);
      if (layout.expert_tensor_parallel_size() > 1 &&
          layout.expert_tensor_parallel_size() != layout.tensor_model_parallel_size())
        settings.ranks.expert_tensor_and_model_parallel = &groups.get(dist::GroupKind::ExpertTensorAndModelParallel);
    }
    train_gpt(options, settings);
  } catch (const FailedOnSomeRank& e) {
    // Every rank stopped at the same step: each says why (as the program reports errors) and
    // all leave MPI in order.
    print_program_error("mgt-train", e.what());
    return e.exit_code();
  }
  return kExitOk;
}

}  // namespace mgt
