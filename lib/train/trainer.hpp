// mgt-train's work: Megatron's pretrain_gpt.py loop on one process and the CPU backend.
//
//   setup     tokenizer and padded vocabulary, model (initialised from --seed), AdamW, LR/WD
//             scheduler; --load restores a checkpoint; the data indices are built or found in
//             the dataset cache and read ahead on a background thread from the consumed samples.
//   iteration micro-batches (global batch / micro batch) of forward and backward with dropout
//             masks from (seed, micro step); gradient norm; a non-finite loss or gradient skips
//             the update (counted as skipped and NaN) — a run of them stops with an error and the
//             last checkpoint untouched; else clip, AdamW, scheduler step.
//   then      the Megatron log line every --log-interval, validation every --eval-interval,
//             checkpoint every --save-interval, and the exit conditions (exit signal,
//             --exit-duration-in-mins, --exit-interval: save with --save, stop cleanly).
//   end       final checkpoint, validation and test evaluations.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>

#include "train/exit_conditions.hpp"
#include "train/train_options.hpp"

namespace mgt {

// What one training iteration did, for tests and tools watching a run.
struct IterationRecord {
  std::int64_t iteration = 0;  // the iteration just completed (1 for the first)
  double loss = 0.0;           // Σ CE·mask / Σ mask over the global batch
  double grad_norm = 0.0;      // before clipping; not finite when the step was skipped
  double learning_rate = 0.0;  // the rate this step used
  bool skipped = false;        // loss or gradients not finite: no update
};

struct TrainerHooks {
  // After each iteration, before the log line, evaluation, checkpoint and exit checks.
  std::function<void(const IterationRecord&)> after_iteration;
  // Fault injection: when it returns true for an iteration (1-based), that iteration's gradients
  // are made NaN before the optimizer sees them.
  std::function<bool(std::int64_t iteration)> poison_gradients;
};

struct TrainerSettings {
  std::ostream* out = nullptr;  // Megatron's printed lines; null: standard output
  // This many consecutive iterations with a non-finite loss or gradient stop training.
  std::int64_t max_consecutive_nonfinite_iterations = 10;
};

struct TrainResult {
  std::int64_t iteration = 0;  // the last iteration completed
  ExitReason exit_reason = ExitReason::None;  // None: --train-iters reached
  std::optional<std::string> last_checkpoint;  // directory saved last by this run
};

// Runs the whole training. Throws mgt::Error (UsageError for flags mgt-train refuses).
TrainResult train_gpt(const TrainOptions& options, const TrainerSettings& settings = {},
                      const TrainerHooks& hooks = {});

// mgt-train's entry point after parsing: --help, or train_gpt. Returns the exit code.
int run_training(const TrainOptions& options);

}  // namespace mgt
