// Finding a checkpoint to resume from when SAVE has iteration directories but no tracker file
// (lost, or removed by hand): the newest iteration directory that is complete. Resuming from it,
// rather than starting over, keeps a run from writing its own iterations over committed ones.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mgt::ckpt {

// Why an iteration directory cannot be resumed from; "" when it is complete: it holds one model
// shard per tensor- and pipeline-parallel rank its metadata names, every shard opens as an mgt
// shard of `iteration`, and every tensor in it passes its checksums.
std::string iteration_directory_problem(const std::string& directory, std::int64_t iteration);

struct IterationCandidate {
  std::int64_t iteration = 0;
  std::string directory;
  std::string problem;  // "" for a complete one
};

struct NewestCompleteIteration {
  std::optional<IterationCandidate> complete;  // the newest complete iteration directory
  std::vector<IterationCandidate> skipped;     // newer ones that are not complete, newest first
};

// Checks SAVE's iter_NNNNNNN directories from the newest down and stops at the first complete one.
NewestCompleteIteration find_newest_complete_iteration(const std::string& save_dir);

}  // namespace mgt::ckpt
