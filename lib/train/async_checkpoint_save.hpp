// --async-save: Megatron's asynchronous checkpointing (megatron/training/async_utils.py:
// schedule_async_save, maybe_finalize_async_save; megatron/core/dist_checkpointing/strategies/
// async_utils.py) for mgt's checkpoints. At the save iteration every rank copies its part of the
// state to host memory (snapshot_train_checkpoint) and a thread of its own writes that copy into
// the save's staging directory while training goes on. The save is finalized (rank 0 renames the
// staging directory into place and moves the tracker file) only once every rank's thread has
// finished: checked without waiting after each iteration, waited for before the next save and at
// the end of the run. Until then the previous checkpoint stays the latest, so a kill at any moment
// leaves it loadable. A write that failed on any rank fails the run at its finalization, with the
// message of the rank where it failed (the file and why), on every rank.
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "ckpt/shard_file_snapshot.hpp"
#include "dist/communicator.hpp"
#include "train/train_checkpoint.hpp"

namespace mgt {

class AsyncCheckpointSave {
public:
  // Starts this rank's thread writing `files` into save->staging_dir(); copy_seconds is what the
  // copy to host memory took, for the statistics.
  AsyncCheckpointSave(std::unique_ptr<CollectiveSave> save, std::vector<ckpt::ShardFileSnapshot> files,
                      double copy_seconds, ckpt::SnapshotWriteOptions options = {});
  // Waits for the thread; a save never finalized is abandoned (its staging directory removed).
  ~AsyncCheckpointSave();
  AsyncCheckpointSave(const AsyncCheckpointSave&) = delete;
  AsyncCheckpointSave& operator=(const AsyncCheckpointSave&) = delete;

  std::int64_t iteration() const { return save_->iteration(); }
  // Whether this rank's thread has finished (no communication).
  bool written() const { return written_.load(std::memory_order_acquire); }

  // Collective over `world`: every rank calls it at the same points. Without `blocking`, returns
  // nullopt while the thread of any rank still writes. Otherwise (after waiting, when
  // `blocking`) publishes the checkpoint and returns its directory and every rank's statistics;
  // throws CollectiveSave's error on every rank when a write failed on any. Call it once it has
  // returned a value or thrown no more.
  std::optional<SavedTrainCheckpoint> try_finalize(dist::Communicator& world, bool blocking);

private:
  void write(const ckpt::SnapshotWriteOptions& options);

  std::unique_ptr<CollectiveSave> save_;
  std::vector<ckpt::ShardFileSnapshot> files_;
  RankSaveStatistics statistics_;
  std::exception_ptr failure_;
  std::atomic<bool> written_{false};
  std::thread thread_;  // last: started once everything it reads is in place
};

// Collective over `world`: prepares the save of progress.iteration (CollectiveSave), copies this
// rank's part to host memory and starts writing it in the background. Throws, every rank
// alike, when preparing or copying failed on any rank.
std::unique_ptr<AsyncCheckpointSave> start_async_train_checkpoint_save(
    const std::string& save_dir, const TrainCheckpointParts& parts, const TrainCheckpointSaveSettings& settings,
    dist::Communicator& world, const ckpt::WorldLayout& layout, ckpt::SnapshotWriteOptions options = {});

}  // namespace mgt
