// Turns signals into a flag that long work polls, so that it can stop at a safe point and clean
// up (remove temporaries, finish a checkpoint) instead of dying where it stands. A handler can
// only touch static storage, so there is one flag per process: one SignalFlag at a time.
#pragma once
#include <signal.h>

#include <atomic>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace mgt {

class SignalFlag {
public:
  struct Policy {
    // A signal ignored when the program starts (nohup's SIGHUP, SIGINT in a shell's background
    // job) stays ignored: whoever started the program asked for it to survive that signal.
    bool leave_ignored = false;
    // The second arrival of a handled signal takes the default action (for SIGINT: the program
    // dies), a way out should stopping at a safe point hang.
    bool repeat_kills = false;
  };

  // Installs the handlers (sigaction, SA_RESTART: interrupted reads and writes resume, the work
  // polls the flag). Throws mgt::Error if another SignalFlag is alive or sigaction fails.
  explicit SignalFlag(std::initializer_list<int> signals, Policy policy);
  explicit SignalFlag(std::initializer_list<int> signals) : SignalFlag(signals, Policy{}) {}
  ~SignalFlag();  // restores every previous disposition
  SignalFlag(const SignalFlag&) = delete;
  SignalFlag& operator=(const SignalFlag&) = delete;

  bool raised() const { return signal() != 0; }
  // The first handled signal that arrived, 0 before any.
  int signal() const { return flag().load(std::memory_order_relaxed); }
  // The flag itself, for code that polls it without knowing about signals: 0, or a signal number.
  const std::atomic<int>& flag() const;

private:
  std::vector<std::pair<int, struct sigaction>> previous_;
};

// "SIGINT" for SIGINT; "signal N" for a signal without a usual name.
std::string signal_name(int signal);

// The exit status of a program that stops because of `signal`, as shells report one killed by
// it: 128 + the signal number.
inline int signal_exit_code(int signal) { return 128 + signal; }

}  // namespace mgt
