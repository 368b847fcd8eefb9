// Publishing one iteration's checkpoint so that a crash at any instant leaves SAVE loadable:
// shards are written into a hidden staging directory, made durable, renamed to iter_NNNNNNN in
// one step, and only then does the tracker file move forward. A committed iteration directory is
// never replaced: saving an iteration that SAVE already holds fails and leaves it as it was.
//
// Only the holder of SAVE's SaveDirectoryLock saves into it (the clean-up of what interrupted
// saves left would otherwise remove another writer's live staging directory).
// Single process: construct IterationSave, write shards into staging_dir(), commit().
// Several ranks: the rank holding the lock calls prepare_staging_directory(); all ranks write
// their shards into the same path (staging_directory() with a token they agree on) and fsync them
// (ShardWriter::close does); after a barrier, that rank calls publish_iteration().
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace mgt::ckpt {

// Points inside publish_iteration(), reported to SaveOptions::on_step as they are reached.
enum class SaveStep {
  StagingSynced,   // staging directory and its files are durable
  Published,       // iter_NNNNNNN now holds the new checkpoint
  TrackerWritten,  // latest_checkpointed_iteration.txt names this iteration
};
std::string_view save_step_name(SaveStep step);

struct SaveOptions {
  // Distinguishes this save's staging directory; empty means this process's PID.
  std::string staging_token;
  // Called at each SaveStep (progress reporting; tests use it to stop a save at a given step).
  std::function<void(SaveStep)> on_step;
};

// Creates SAVE if needed and an empty staging directory for `iteration`; first clears what
// crashed saves left behind (staging directories, tracker temporaries) and completes a
// replacement that an older mgt left interrupted. Throws mgt::Error, before creating anything,
// when SAVE already holds iter_NNNNNNN. Returns the staging directory's path.
std::string prepare_staging_directory(const std::string& save_dir, std::int64_t iteration,
                                      const SaveOptions& options = {});

// Makes the staging directory durable, renames it to iter_NNNNNNN (never over an existing
// entry: mgt::Error then, and the staging directory stays for the caller to remove), and writes
// the tracker file. The shard files in it must already be closed and synced.
void publish_iteration(const std::string& save_dir, std::int64_t iteration, const std::string& staging_dir,
                       const SaveOptions& options = {});

// Removes what interrupted saves left in SAVE: staging directories (except `keep`), tracker
// temporaries; an iteration left only under its aside name (by an older mgt that replaced
// iterations) is moved back. Call it only holding SAVE's SaveDirectoryLock.
void clean_interrupted_saves(const std::string& save_dir, const std::string& keep = {});

// True for the names clean_interrupted_saves removes: a staging directory (".iter_0000100.tmp-X")
// or a tracker temporary. An iteration set aside by an older mgt (".iter_0000100.old") is not
// among them: it is a committed checkpoint.
bool is_interrupted_save_leftover(std::string_view name);

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
