#include "dist/distributed_runtime.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>

#include "core/error.hpp"
#include "core/log.hpp"
#include "dist/local_communicator.hpp"
#include "dist/mpi_check.hpp"
#include "dist/mpi_communicator.hpp"
#include "dist/parallel_layout.hpp"
#include "dist/rank_processes.hpp"

namespace mgt::dist {
namespace {

// MPI can be initialised once per process.
std::atomic<bool> g_mpi_started{false};

// The watchdog's action in a real run: say why on stderr, then end every rank.
void abort_job(const std::string& message) {
  std::fprintf(stderr, "%s\n", timeout_report_line(message).c_str());
  std::fflush(stderr);
  // The launcher forwards a rank's output through a pipe and stops reading once it tears the job
  // down: a moment for the message to get through first (on a loaded machine it was lost).
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  // MPI_Abort makes the launcher (hydra, or srun through PMI) kill every rank of the job.
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

// Which group of `groups` holds `rank`, and where; checks that the groups are disjoint ranks of
// the world.
struct Placement {
  int group = -1;
  int position = -1;
};
Placement place(const std::string& kind, const std::vector<std::vector<int>>& groups, int rank,
                int world_size) {
  Placement p;
  std::vector<bool> seen(static_cast<size_t>(world_size), false);
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].empty()) throw Error("an empty " + kind + " group");
    for (size_t i = 0; i < groups[g].size(); ++i) {
      const int r = groups[g][i];
      if (r < 0 || r >= world_size || seen[static_cast<size_t>(r)])
        throw Error("invalid " + kind + " groups: rank " + std::to_string(r) +
                    (r < 0 || r >= world_size ? " is outside the world" : " is in two groups"));
      seen[static_cast<size_t>(r)] = true;
      if (r == rank) p = {static_cast<int>(g), static_cast<int>(i)};
    }
  }
  return p;
}

}  // namespace

std::unique_ptr<DistributedRuntime> DistributedRuntime::start(std::chrono::milliseconds timeout) {
  return start(timeout, read_launch_environment());
}

std::unique_ptr<DistributedRuntime> DistributedRuntime::start(std::chrono::milliseconds timeout,
                                                              const LaunchEnvironment& launch) {
  if (timeout <= std::chrono::milliseconds(0))
    throw UsageError("--distributed-timeout-minutes must be positive");
  std::unique_ptr<DistributedRuntime> runtime(new DistributedRuntime());
  if (!launch.has_process_manager) {
    // A lone process: refuse before anything starts if a launcher meant several.
    check_launch(launch, 1);
    runtime->watchdog_ = std::make_unique<CollectiveWatchdog>(timeout, 0, abort_job);
    runtime->world_ = std::make_unique<LocalCommunicator>("world", 0, nullptr,
                                                          runtime->watchdog_.get());
    return runtime;
  }

  if (g_mpi_started.exchange(true))
    throw Error("the distributed runtime was started twice in one process (MPI allows one start)");
  // The watchdog exists before MPI_Init so that a launch that never completes ends too.
  runtime->watchdog_ = std::make_unique<CollectiveWatchdog>(timeout, 0, abort_job);
  {
    auto scope = runtime->watchdog_->watch(InFlightOperation{"MPI_Init_thread"});
    // MPI_THREAD_MULTIPLE: the watchdog thread calls MPI_Abort while another thread may be
    // inside MPI.
    int provided = 0;
    MGT_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
  }
  runtime->uses_mpi_ = true;
  MPI_Comm world = MPI_COMM_NULL;
  MGT_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &world));
  MGT_MPI_CHECK(MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN));
  MGT_MPI_CHECK(MPI_Comm_rank(world, &runtime->rank_));
  MGT_MPI_CHECK(MPI_Comm_size(world, &runtime->world_size_));
  std::vector<int> all(static_cast<size_t>(runtime->world_size_));
  for (int r = 0; r < runtime->world_size_; ++r) all[static_cast<size_t>(r)] = r;
  runtime->watchdog_->set_world_rank(runtime->rank_);
  runtime->world_ = std::make_unique<MpiCommunicator>(
      world, GroupMembers{"world", all, runtime->rank_}, nullptr, runtime->watchdog_.get());
  log::set_rank(runtime->rank_, runtime->world_size_);
  // A launcher reports a crashed rank by its PID: the rank says which it was.
  if (runtime->world_size_ > 1) name_rank_on_fatal_signals(runtime->rank_);
  check_launch(launch, runtime->world_size_);
  return runtime;
}

DistributedRuntime::~DistributedRuntime() {
  world_.reset();
  if (!uses_mpi_ || std::uncaught_exceptions() > 0) return;
  auto scope = watchdog_->watch(InFlightOperation{"MPI_Finalize"});
  MPI_Finalize();
}

std::unique_ptr<Communicator> DistributedRuntime::split(
    const std::string& kind, const std::vector<std::vector<int>>& groups, MemoryMover* mover) {
  const Placement p = place(kind, groups, rank_, world_size_);
  if (!uses_mpi_) {
    if (p.group < 0) return nullptr;
    return std::make_unique<LocalCommunicator>(kind, rank_, mover, watchdog_.get());
  }
  // Creating communicators is collective over the world, so it is watched like any collective.
  const std::string what = world_->description();
  MPI_Comm comm = MPI_COMM_NULL;
  {
    auto scope = watchdog_->watch(InFlightOperation{"MPI_Comm_split", nullptr, &what});
    MGT_MPI_CHECK(MPI_Comm_split(static_cast<MpiCommunicator&>(*world_).handle(),
                                 p.group < 0 ? MPI_UNDEFINED : p.group, p.position, &comm));
  }
  if (p.group < 0) return nullptr;
  return std::make_unique<MpiCommunicator>(
      comm, GroupMembers{kind, groups[static_cast<size_t>(p.group)], p.position}, mover,
      watchdog_.get());
}

}  // namespace mgt::dist
