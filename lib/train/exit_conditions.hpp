// When mgt-train stops before --train-iters: Megatron's checkpoint_and_decide_exit
// (megatron/training/training.py). After each iteration the loop asks should_exit(iteration):
//   Signal    --exit-signal-handler and the exit signal (or SIGTERM, always handled with it)
//             arrived (checked first). Megatron saves (with --save) and exits, skipping the
//             regular save of that iteration.
//   Duration  --exit-duration-in-mins: more than that many minutes since the program started.
//   Interval  --exit-interval: the iteration is a multiple of it.
// For Duration and Interval Megatron saves (with --save) unless the regular --save-interval
// save of the same iteration already did. Zero means "not set" for both flags, as in Megatron.
// With several ranks, the loop must combine the answers (any rank's reason stops all) before
// acting, as Megatron's all-reduce does.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/signal_flag.hpp"

namespace mgt {

struct LoggingOptions;

enum class ExitReason { None, Signal, Duration, Interval };

// "SIGTERM" → SIGTERM, for the names --exit-signal accepts; throws mgt::UsageError otherwise.
int exit_signal_number(const std::string& name);

// Every signal --exit-signal accepts: those mgt-train holds from its first instruction
// (SignalHold) until its ExitConditions decides which of them stop the run.
std::vector<int> exit_signal_choices();

class ExitConditions {
public:
  using Clock = std::chrono::steady_clock;

  struct Settings {
    std::optional<std::int64_t> exit_interval;
    std::optional<std::int64_t> exit_duration_in_mins;
    bool exit_signal_handler = false;
    std::string exit_signal = "SIGTERM";
  };

  // Installs the signal handler (a SignalFlag) when asked; `start` is when the run began.
  // Only one ExitConditions (or other SignalFlag) may handle signals at a time (mgt::Error
  // otherwise).
  explicit ExitConditions(const Settings& settings, Clock::time_point start = Clock::now());
  explicit ExitConditions(const LoggingOptions& options, Clock::time_point start = Clock::now());
  ~ExitConditions();  // restores the signal's previous disposition
  ExitConditions(const ExitConditions&) = delete;
  ExitConditions& operator=(const ExitConditions&) = delete;

  ExitReason should_exit(std::int64_t iteration, Clock::time_point now = Clock::now()) const;

  bool signal_received() const;
  // Minutes since the start, as Megatron computes train_time.
  double minutes_since_start(Clock::time_point now = Clock::now()) const;

  // What Megatron prints (inside print_datetime's brackets) before exiting:
  // "exiting program after receiving SIGTERM." (naming the signal that arrived, else the
  // configured one),
  // "exiting program after 12.5 minutes", "exiting program at iteration 100".
  std::string exit_message(ExitReason reason, std::int64_t iteration, Clock::time_point now = Clock::now()) const;

private:
  Settings settings_;
  Clock::time_point start_;
  std::optional<SignalFlag> signal_flag_;  // with --exit-signal-handler
};

}  // namespace mgt
