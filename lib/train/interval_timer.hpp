#pragma once
#include <chrono>

namespace mgt {

// Megatron's interval timer: time between log lines, with evaluation and checkpointing left out.
class IntervalTimer {
public:
  using Clock = std::chrono::steady_clock;
  void start() {
    if (!running_) started_ = Clock::now();
    running_ = true;
  }
  void stop() {
    if (running_) elapsed_ += std::chrono::duration<double>(Clock::now() - started_).count();
    running_ = false;
  }
  // Seconds so far, and starts over.
  double lap() {
    const bool was_running = running_;
    stop();
    const double seconds = elapsed_;
    elapsed_ = 0.0;
    if (was_running) start();
    return seconds;
  }

private:
  Clock::time_point started_{};
  double elapsed_ = 0.0;
  bool running_ = false;
};

}  // namespace mgt
