#include "train/train_launch.hpp"

#include <iostream>
#include <memory>

#include "core/error.hpp"
#include "core/log.hpp"
#include "dist/backend_memory_mover.hpp"
#include "dist/distributed_runtime.hpp"
#include "dist/parallel_layout.hpp"
#include "dist/process_groups.hpp"
#include "kernels/backend_factory.hpp"
#include "train/train_memory.hpp"
#include "train/rank_agreement.hpp"
#include "train/train_options.hpp"
#include "train/trainer.hpp"

namespace mgt {

namespace {

dist::ParallelFlags parallel_flags(const TrainOptions& o) {
  dist::ParallelFlags f;
  f.tensor_model_parallel_size = o.parallel.tensor_model_parallel_size;
  f.pipeline_model_parallel_size = o.parallel.pipeline_model_parallel_size;
  f.distributed_timeout_minutes = o.parallel.distributed_timeout_minutes;
  return f;
}

}  // namespace

int run_training_program(int argc, const char* const* argv) {
  TrainOptions options = read_train_options(argc, argv);
  if (options.show_help) {
    std::cout << train_options_help();
    return kExitOk;
  }
  const dist::ParallelFlags flags = parallel_flags(options);
  dist::validate_parallel_flags(flags);
  // MPI under a launcher, nothing for a lone process; from here on log lines carry the rank.
  std::unique_ptr<dist::DistributedRuntime> runtime = dist::DistributedRuntime::start(flags.distributed_timeout());
  const bool chief = runtime->rank() == 0;
  if (!chief) log::set_min_level(log::Level::Warning);
  try {
    validate_train_options(options, runtime->world_size());
  } catch (const Error& e) {
    if (e.exit_code() != kExitUsage) throw;
    // Every rank finds the same mistake in the same flags: rank 0 says it once, as the program
    // reports errors, and every rank leaves MPI in order with the usage status.
    if (chief) std::cerr << "mgt-train: " << e.what() << std::endl;
    return e.exit_code();
  }
  if (options.dry_run) return chief ? run_train_dry_run(options, std::cout, std::cerr) : kExitOk;

  // The groups move the backend's buffers: an MPI group stages device memory through the host
  // with the backend's own copies (the CPU backend's memory is host memory already).
  std::unique_ptr<Backend> backend = make_backend(options.device);
  dist::BackendMemoryMover mover(*backend);
  const dist::ParallelLayout layout(flags, runtime->world_size());
  dist::ProcessGroups groups = dist::make_process_groups(*runtime, layout, &mover);

  TrainerSettings settings;
  settings.backend = backend.get();
  settings.ranks.world = &runtime->world();
  settings.ranks.data_parallel = &groups.get(dist::GroupKind::DataParallel);
  try {
    train_gpt(options, settings);
  } catch (const FailedOnSomeRank& e) {
    // Every rank stopped at the same step: each says why (as the program reports errors) and
    // all leave MPI in order.
    std::cerr << "mgt-train: " << e.what() << std::endl;
    return e.exit_code();
  }
  return kExitOk;
}

}  // namespace mgt
