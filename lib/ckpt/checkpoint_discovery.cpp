#include "ckpt/checkpoint_discovery.hpp"

#include <filesystem>

#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "core/error.hpp"

namespace mgt::ckpt {

std::string iteration_directory_problem(const std::string& directory, std::int64_t iteration,
                                        CompletenessCheck check) {
  try {
    const std::vector<std::string> shards = list_shard_files(directory);
    if (shards.empty()) return "it holds no " + shard_file_name({}) + " or other shard file";
    std::int64_t model_shards = 0;
    std::int64_t optimizer_shards = 0;
    std::optional<WorldLayout> world;
    for (const std::string& path : shards) {
      const ShardReader reader(path);
      const CheckpointMetadata& meta = reader.metadata();
      if (meta.iteration != iteration)
        return std::filesystem::path(path).filename().string() + " is of iteration " + std::to_string(meta.iteration);
      if (!world) world = meta.world;
      if (parse_shard_file_name(std::filesystem::path(path).filename().string())->data_parallel_rank) ++optimizer_shards;
      else ++model_shards;
      if (check == CompletenessCheck::Checksums) reader.verify();
    }
    const std::int64_t expected =
        std::int64_t{world->tensor_model_parallel_size} * std::int64_t{world->pipeline_model_parallel_size};
    if (model_shards != expected)
      return "it holds " + std::to_string(model_shards) + " model shards of " + std::to_string(expected);
    // With the distributed optimizer (or expert parallelism) every data-parallel rank of every
    // model shard wrote one.
    const std::int64_t expected_optimizer = expected * std::int64_t{world->data_parallel_size};
    if (optimizer_shards != 0 && optimizer_shards != expected_optimizer)
      return "it holds " + std::to_string(optimizer_shards) + " optimizer shards of " +
             std::to_string(expected_optimizer);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

NewestCompleteIteration find_newest_complete_iteration(const std::string& save_dir, CompletenessCheck check,
                                                       std::int64_t after) {
  NewestCompleteIteration found;
  const std::vector<std::int64_t> iterations = list_iteration_directories(save_dir);
  for (auto it = iterations.rbegin(); it != iterations.rend() && *it > after; ++it) {
    IterationCandidate candidate{*it, iteration_directory(save_dir, *it), {}};
    candidate.problem = iteration_directory_problem(candidate.directory, candidate.iteration, check);
    if (candidate.problem.empty()) {
      found.complete = std::move(candidate);
      break;
    }
    found.skipped.push_back(std::move(candidate));
  }
  return found;
}

namespace {

std::string skipped_text(const NewestCompleteIteration& found) {
  std::string text;
  for (const IterationCandidate& c : found.skipped) text += "; " + c.directory + " is not complete: " + c.problem;
  return text;
}

// Whether `directory` was last written before the tracker file was. A save killed between
// renaming its iteration directory into place and moving the tracker leaves the directory the
// newer of the two; a tracker written after it (a later save of another run into the same
// directory, or a tracker set back by hand to roll back) names what is to be resumed. Equal
// times count as before: file times tick coarsely (a few milliseconds), so a directory copied and
// a tracker rolled back just after it can share one, while an interrupted save's tracker dates
// from a save iterations earlier.
bool written_before_tracker(const std::string& directory, const std::string& save_dir) {
  std::error_code a, b;
  const auto directory_time = std::filesystem::last_write_time(directory, a);
  const auto tracker_time = std::filesystem::last_write_time(tracker_file_path(save_dir), b);
  return !a && !b && directory_time <= tracker_time;
}

}  // namespace

std::optional<CheckpointToResume> find_checkpoint_to_resume(const std::string& save_dir) {
  const std::string tracker(kTrackerFileName);
  const std::optional<LatestCheckpoint> latest = read_tracker_file(save_dir);
  if (!latest) {
    const NewestCompleteIteration found = find_newest_complete_iteration(save_dir);
    if (found.complete)
      return CheckpointToResume{found.complete->directory, found.complete->iteration,
                                save_dir + " has no " + tracker + ": resuming from " + found.complete->directory +
                                    ", its newest complete checkpoint (iteration " +
                                    std::to_string(found.complete->iteration) + ")" + skipped_text(found)};
    if (found.skipped.empty()) return std::nullopt;
    throw Error(save_dir + " has no " + tracker + " and none of its " + std::to_string(found.skipped.size()) +
                " iteration directories is a complete checkpoint" + skipped_text(found) +
                "; move them away to start over, or repair the tracker file");
  }
  // A release checkpoint counts as iteration 0: a run started from it saves iterations after it.
  const NewestCompleteIteration newer =
      find_newest_complete_iteration(save_dir, CompletenessCheck::Structure, latest->iteration);
  const std::string named = latest->release ? "the release checkpoint" : "iteration " + std::to_string(latest->iteration);
  if (newer.complete && written_before_tracker(newer.complete->directory, save_dir))
    return CheckpointToResume{find_checkpoint_directory(save_dir, *latest), latest->iteration,
                              tracker_file_path(save_dir) + " names " + named + "; " + newer.complete->directory +
                                  ", a complete checkpoint of iteration " + std::to_string(newer.complete->iteration) +
                                  ", was written before the tracker last moved (by another run, or rolled back "
                                  "from): not resumed"};
  if (newer.complete)
    return CheckpointToResume{
        newer.complete->directory, newer.complete->iteration,
        tracker_file_path(save_dir) + " names " + named + ", but " + newer.complete->directory +
            " is a newer complete checkpoint (a save was interrupted before it moved the tracker): resuming from "
            "iteration " + std::to_string(newer.complete->iteration) + skipped_text(newer)};
  CheckpointToResume resume{find_checkpoint_directory(save_dir, *latest), latest->iteration, {}};
  if (!newer.skipped.empty())
    resume.note = tracker_file_path(save_dir) + " names " + named + "; newer iteration directories are not resumed" +
                  skipped_text(newer);
  return resume;
}

CheckpointToResume checkpoint_at_step(const std::string& save_dir, std::int64_t step) {
  const std::string flag = "--ckpt-step " + std::to_string(step);
  std::string directory;
  try {
    directory = find_checkpoint_directory(save_dir, LatestCheckpoint{step, false});
  } catch (const Error&) {
    std::string held;
    for (const std::int64_t iteration : list_iteration_directories(save_dir))
      held += (held.empty() ? "" : ", ") + std::to_string(iteration);
    throw Error(flag + ": " + save_dir + " holds no checkpoint of iteration " + std::to_string(step) + " (" +
                (held.empty() ? "it holds no iteration directories" : "its iterations: " + held) + ")");
  }
  const std::string problem = iteration_directory_problem(directory, step, CompletenessCheck::Structure);
  if (!problem.empty()) throw Error(flag + ": " + directory + " is not a complete checkpoint: " + problem);
  return CheckpointToResume{directory, step, {}};
}

std::optional<CheckpointToResume> find_checkpoint_to_load(const std::string& save_dir,
                                                          std::optional<std::int64_t> step) {
  if (step && *step != 0) return checkpoint_at_step(save_dir, *step);
  return find_checkpoint_to_resume(save_dir);
}

}  // namespace mgt::ckpt
