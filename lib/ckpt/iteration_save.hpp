// Publishing one iteration's checkpoint so that a crash at any instant leaves SAVE loadable:
// shards are written into a hidden staging directory, made durable, renamed to iter_NNNNNNN in
// one step, and only then does the tracker file move forward. Re-saving an iteration that
// already exists swaps the directories atomically (renameat2 RENAME_EXCHANGE) or, where the file
// system cannot, moves the old copy to a fixed aside name that readers also look at.
//
// Single process: construct IterationSave, write shards into staging_dir(), commit().
// Several ranks: one rank calls prepare_staging_directory(); all ranks write their shards into
// the same path (staging_directory() with a token they agree on) and fsync them (ShardWriter::
// close does); after a barrier, that rank calls publish_iteration().
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace mgt::ckpt {

// Points inside publish_iteration(), reported to SaveOptions::on_step as they are reached.
enum class SaveStep {
  StagingSynced,      // staging directory and its files are durable
  PreviousMovedAside, // (replacing, no atomic swap) old copy renamed to its aside name
  Published,          // iter_NNNNNNN now holds the new checkpoint
  PreviousRemoved,    // (replacing) the old copy is gone
  TrackerWritten,     // latest_checkpointed_iteration.txt names this iteration
};
std::string_view save_step_name(SaveStep step);

struct SaveOptions {
  // Distinguishes this save's staging directory; empty means this process's PID.
  std::string staging_token;
  // Use renameat2(RENAME_EXCHANGE) to replace an existing iteration when the file system
  // supports it; false forces the aside-rename path (it exists for file systems without it).
  bool atomic_exchange = true;
  // Called at each SaveStep (progress reporting; tests use it to stop a save at a given step).
  std::function<void(SaveStep)> on_step;
};

// Creates SAVE if needed and an empty staging directory for `iteration`; first clears what
// crashed saves left behind (staging directories, tracker temporaries) and completes an
// interrupted replacement. Returns the staging directory's path.
std::string prepare_staging_directory(const std::string& save_dir, std::int64_t iteration,
                                      const SaveOptions& options = {});

// Makes the staging directory durable, renames it to iter_NNNNNNN (replacing an existing one),
// and writes the tracker file. The shard files in it must already be closed and synced.
void publish_iteration(const std::string& save_dir, std::int64_t iteration, const std::string& staging_dir,
                       const SaveOptions& options = {});

// Removes what interrupted saves left in SAVE: staging directories (except `keep`), tracker
// temporaries; an iteration left only under its aside name is moved back. Safe to call anytime
// no save into SAVE is running.
void clean_interrupted_saves(const std::string& save_dir, const std::string& keep = {});

class IterationSave {
public:
  IterationSave(std::string save_dir, std::int64_t iteration, SaveOptions options = {});
  ~IterationSave();  // an uncommitted save removes its staging directory
  IterationSave(const IterationSave&) = delete;
  IterationSave& operator=(const IterationSave&) = delete;

  const std::string& staging_dir() const { return staging_dir_; }
  // Path of a file inside the staging directory, e.g. staged_path(shard_file_name(id)).
  std::string staged_path(std::string_view file_name) const;
  std::int64_t iteration() const { return iteration_; }
  // The directory the checkpoint will have once committed.
  std::string final_dir() const;

  void commit();

private:
  std::string save_dir_;
  std::int64_t iteration_;
  SaveOptions options_;
  std::string staging_dir_;
  bool committed_ = false;
};

}  // namespace mgt::ckpt
