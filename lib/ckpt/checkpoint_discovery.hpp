// Finding the checkpoint to resume from in SAVE. Usually the tracker file names it. Two states
// need more: SAVE has iteration directories but no tracker file (lost, or removed by hand), and
// SAVE has an iteration directory newer than the one the tracker names (a save killed after it
// renamed iter_NNNNNNN into place and before it rewrote the tracker). Either way the newest
// complete iteration directory is resumed: starting over, or from the tracker's older iteration,
// would have the run save its own iterations over committed ones.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mgt::ckpt {

// How closely iteration_directory_problem looks.
enum class CompletenessCheck {
  Structure,  // the shard files, their metadata and their tensor lists
  Checksums,  // that, and every tensor read back through its checksums
};

// Why an iteration directory cannot be resumed from; "" when it is complete: it holds one model
// shard per tensor- and pipeline-parallel rank its metadata names, every shard opens as an mgt
// shard of `iteration` and, with CompletenessCheck::Checksums, every tensor in it passes its
// checksums.
std::string iteration_directory_problem(const std::string& directory, std::int64_t iteration,
                                        CompletenessCheck check = CompletenessCheck::Checksums);

struct IterationCandidate {
  std::int64_t iteration = 0;
  std::string directory;
  std::string problem;  // "" for a complete one
};

struct NewestCompleteIteration {
  std::optional<IterationCandidate> complete;  // the newest complete iteration directory
  std::vector<IterationCandidate> skipped;     // newer ones that are not complete, newest first
};

// Checks SAVE's iter_NNNNNNN directories newer than `after` from the newest down and stops at
// the first complete one.
NewestCompleteIteration find_newest_complete_iteration(const std::string& save_dir,
                                                       CompletenessCheck check = CompletenessCheck::Checksums,
                                                       std::int64_t after = -1);

// The checkpoint a run resuming from SAVE reads.
struct CheckpointToResume {
  std::string directory;
  std::int64_t iteration = 0;
  // Why it is not the checkpoint the tracker file names, for a warning; "" when it is.
  std::string note;
};

// The tracker's checkpoint, unless an iteration directory newer than it is complete: then the
// newest such one. The writer renames a staging directory to iter_NNNNNNN only once every shard
// of every rank is durable (iteration_save.hpp), so such a directory is a whole checkpoint; it
// is still checked for the shards and metadata its layout needs (its checksums are checked as it
// is read). Without a tracker file, the newest iteration directory whose checksums all pass.
// nullopt when SAVE holds neither a tracker file nor an iteration directory; mgt::Error when it
// has iteration directories but no tracker file and none of them is complete, or when the tracker
// names a checkpoint that does not exist and no newer one is complete.
std::optional<CheckpointToResume> find_checkpoint_to_resume(const std::string& save_dir);

// --ckpt-step N: Megatron's load_checkpoint reads iteration N, whatever the tracker file names.
// Its directory in SAVE (or the one a save of N set aside), checked as
// iteration_directory_problem's Structure; mgt::Error naming it, and the iterations SAVE holds,
// when it is missing or not a complete checkpoint.
CheckpointToResume checkpoint_at_step(const std::string& save_dir, std::int64_t step);

// The checkpoint a run loads from SAVE: checkpoint_at_step's with a step, else
// find_checkpoint_to_resume's. A step of 0 counts as none, as Megatron tests the flag's truth.
std::optional<CheckpointToResume> find_checkpoint_to_load(const std::string& save_dir,
                                                          std::optional<std::int64_t> step);

}  // namespace mgt::ckpt
