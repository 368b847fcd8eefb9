#include "train/async_checkpoint_save.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <span>
#include <utility>

namespace mgt {

AsyncCheckpointSave::AsyncCheckpointSave(std::unique_ptr<CollectiveSave> save,
                                         std::vector<ckpt::ShardFileSnapshot> files, double copy_seconds,
                                         ckpt::SnapshotWriteOptions options)
    : save_(std::move(save)), files_(std::move(files)) {
  statistics_.copy_seconds = copy_seconds;
  thread_ = std::thread([this, options = std::move(options)] { write(options); });
}

AsyncCheckpointSave::~AsyncCheckpointSave() {
  if (thread_.joinable()) thread_.join();
}

// On the thread: nothing here touches the live training state or communicates.
void AsyncCheckpointSave::write(const ckpt::SnapshotWriteOptions& options) {
  // The training thread comes first where the two share a core. Linux's nice value is per
  // thread; best effort.
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);
  const auto start = std::chrono::steady_clock::now();
  try {
    statistics_.bytes = ckpt::write_shard_snapshots(save_->staging_dir(), files_, options);
  } catch (...) {
    failure_ = std::current_exception();
  }
  statistics_.write_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  files_.clear();  // the host copy is no longer needed
  files_.shrink_to_fit();
  written_.store(true, std::memory_order_release);
}

std::optional<SavedTrainCheckpoint> AsyncCheckpointSave::try_finalize(dist::Communicator& world, bool blocking) {
  if (!blocking) {
    // The maximum over ranks of "still writing": Megatron's all-reduce of the ranks' done flags
    // in AsyncCallsQueue.maybe_finalize_async_calls.
    std::int64_t unfinished = written() ? 0 : 1;
    if (world.size() > 1) world.all_reduce(std::span<std::int64_t>(&unfinished, 1), dist::ReduceOp::Max);
    if (unfinished != 0) return std::nullopt;
  }
  if (thread_.joinable()) thread_.join();
  save_->run("writing the checkpoint shards in the background", [&] {
    if (failure_) std::rethrow_exception(failure_);
  });
  save_->publish();
  return SavedTrainCheckpoint{save_->directory(), gather_save_statistics(world, statistics_)};
}

std::unique_ptr<AsyncCheckpointSave> start_async_train_checkpoint_save(
    const std::string& save_dir, const TrainCheckpointParts& parts, const TrainCheckpointSaveSettings& settings,
    dist::Communicator& world, const ckpt::WorldLayout& layout, ckpt::SnapshotWriteOptions options) {
  auto save = std::make_unique<CollectiveSave>(save_dir, parts.progress.iteration, world);
  std::vector<ckpt::ShardFileSnapshot> files;
  double copy_seconds = 0.0;
  save->run("copying the checkpoint to host memory", [&] {
    const auto start = std::chrono::steady_clock::now();
    files = snapshot_train_checkpoint(parts, settings, layout);
    copy_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
  return std::make_unique<AsyncCheckpointSave>(std::move(save), std::move(files), copy_seconds, std::move(options));
}

}  // namespace mgt
