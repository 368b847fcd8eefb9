// The CPU backend's --profile: each operation runs to its end before the call returns, so the
// host's clock around a hook is the operation's time. At the end of the run the time per
// operation family is printed, largest first, with its share of the total: the same table as the
// CUDA backend's (kernels/cuda/op_profiler.hpp), host time where that one has GPU time.
// set_active(false) pauses the counting (mgt-train counts only its --profile-step window).
#pragma once
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "kernels/backend_operation.hpp"

namespace mgt::cpu {

class HostOpProfiler {
public:
  // `timeline`: the CSV file report() also writes (--profile-timeline); empty: none.
  explicit HostOpProfiler(std::string timeline);
  HostOpProfiler(const HostOpProfiler&) = delete;
  HostOpProfiler& operator=(const HostOpProfiler&) = delete;

  void set_active(bool active) { active_ = active; }
  // The table, one line per operation family, and the timeline file when one was asked for.
  std::string report() const;

private:
  friend class ScopedHostOp;
  using Clock = std::chrono::steady_clock;
  struct Totals {
    double ms = 0.0;
    long calls = 0;
  };
  struct Span {
    const char* op;
    double begin_ms;  // from the first counted operation's start
    double ms;
  };
  // Only the outermost operation counts: a hook that runs others as its parts (a fused
  // operation composed of plain ones) is timed once, under its own name.
  bool enter() { return depth_++ == 0 && active_; }
  void exit() { --depth_; }
  void leave(const char* op, Clock::time_point begin);
  void write_timeline() const;

  std::string timeline_;
  std::map<std::string, Totals> by_op_;
  std::vector<Span> spans_;  // kept only for the timeline
  Clock::time_point first_{};
  bool started_ = false;
  bool active_ = true;
  int depth_ = 0;
};

// Times one operation when a profiler is present (null: no cost beyond a branch), under its name
// in the list of operations (kernels/backend_operations.inc).
class ScopedHostOp {
public:
  ScopedHostOp(HostOpProfiler* profiler, BackendOp op);
  ~ScopedHostOp();
  ScopedHostOp(const ScopedHostOp&) = delete;
  ScopedHostOp& operator=(const ScopedHostOp&) = delete;

private:
  HostOpProfiler* profiler_;
  const char* op_;
  bool counted_ = false;
  HostOpProfiler::Clock::time_point begin_{};
};

}  // namespace mgt::cpu
