// --log-progress: Megatron's progress log, SAVE/progress.txt (megatron/training/utils.py
// append_to_progress_log; megatron/training/training.py compute_throughputs_and_append_to_progress_log
// and get_start_time_from_progress_log, core_v0.13.0). World rank 0 appends one line when a job
// starts and one after each checkpoint it saves, so that the jobs of one run, each resuming the
// last, leave one record of the run's pace across restarts:
//
//   2026-11-30 14:02:11<TAB>Job ID: 4711<TAB># GPUs: 8<TAB>Starting job
//   2026-11-30 14:20:40<TAB>Job ID: 4711<TAB># GPUs: 8<TAB>Saved checkpoint<TAB>Iteration: 500<TAB>
//     Job throughput: 391.2 TFLOP/s/GPU<TAB>Cumulative throughput: 388.0 TFLOP/s/GPU<TAB>
//     Floating-point operations: 3.21e+18<TAB>Tokens (in billions): 2.05
//
// (the second line is one line in the file). The job's throughput counts the FLOPs since this
// job loaded its checkpoint over the time since the program started; the cumulative one counts
// them since the first job of the latest unbroken series of jobs with this world size started,
// from the FLOPs of the last checkpoint saved before it. Time stamps are local time, as Python's
// datetime.now() gives them; the job id is Slurm's ("" outside Slurm).
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace mgt {

// Where the cumulative throughput starts counting: the time stamp of the first "Starting job"
// of the latest series of lines with `world_size` GPUs, and the FLOPs of the last "Saved
// checkpoint" line written before it (0 when none). nullopt when the text holds no such line.
// Lines that are not progress lines are passed over.
struct ProgressLogStart {
  std::string time_stamp;  // "2026-11-30 14:02:11"
  double floating_point_operations = 0.0;
};
std::optional<ProgressLogStart> find_progress_log_start(const std::string& text, std::int64_t world_size);

// One line of the log: time stamp, job id, GPUs and `event`, tab-separated, with its newline.
std::string progress_log_line(const std::string& time_stamp, const std::string& job_id, std::int64_t world_size,
                              const std::string& event);

// After a save: "Saved checkpoint" (or, for a save still being written in the background,
// "Saving async checkpoint") with the iteration, both throughputs, the FLOPs so far and the
// tokens consumed so far.
struct ProgressAfterSave {
  std::int64_t iteration = 0;
  bool background = false;
  double job_tflops_per_gpu = 0.0;
  double cumulative_tflops_per_gpu = 0.0;
  double floating_point_operations_so_far = 0.0;
  double tokens_so_far = 0.0;
};
std::string progress_after_save_event(const ProgressAfterSave& p);

// SAVE/progress.txt of one run, written by world rank 0 only (the caller's concern). A line
// that cannot be written is reported as a warning: the log records the training, it does not
// stop it.
class ProgressLog {
public:
  using Clock = std::chrono::system_clock;
  // `job_id`: the scheduler's (SLURM_JOB_ID), "" outside one; `job_start`: when the program
  // started (Megatron's _TRAIN_START_TIME).
  ProgressLog(std::string save_dir, std::string job_id, std::int64_t world_size, Clock::time_point job_start);

  void job_started(Clock::time_point now = Clock::now());
  // The checkpoint's FLOPs so far once this job loaded its checkpoint: the job's throughput
  // counts from it.
  void set_job_start_flops(double flops) { job_start_flops_ = flops; }
  void checkpoint_saved(std::int64_t iteration, bool background, double flops_so_far, double tokens_so_far,
                        Clock::time_point now = Clock::now());
  // A background save's files all written and the tracker moved.
  void background_save_finished(std::int64_t iteration, Clock::time_point now = Clock::now());

  const std::string& path() const { return path_; }

private:
  void append(const std::string& event, Clock::time_point now);

  std::string path_;
  std::string job_id_;
  std::int64_t world_size_;
  Clock::time_point job_start_;
  double job_start_flops_ = 0.0;
};

}  // namespace mgt
