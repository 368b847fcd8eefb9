// Turns signals into a flag that long work polls, so that it can stop at a safe point and clean
// up (remove temporaries, finish a checkpoint) instead of dying where it stands. A handler can
// only touch static storage, so there is one flag per process: one SignalFlag at a time.
#pragma once
#include <signal.h>

#include <atomic>
#include <initializer_list>
#include <span>
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

// Holds signals from a program's first instruction until its SignalFlag exists, for programs that
// start slowly (MPI, a GPU backend) and would otherwise die of a signal meant to stop them at a
// safe point: a held signal that arrives is remembered instead of taking its default action.
// The next SignalFlag takes over: a held signal it handles that arrived counts as raised (its
// flag holds it from the start); every other held signal gets its disposition from before the
// hold back and, if it arrived, is raised again, so it acts as it would have without the hold
// (by default, it ends the program). The destructor does the same for all of them when no
// SignalFlag took over (the program ended first: --help, a usage error). A second arrival of a
// held signal takes that disposition at once, a way out should the start hang.
// One hold per process, made before any SignalFlag.
class SignalHold {
public:
  // Throws mgt::Error if a hold or a SignalFlag exists, or sigaction fails.
  explicit SignalHold(std::span<const int> signals);
  ~SignalHold();
  SignalHold(const SignalHold&) = delete;
  SignalHold& operator=(const SignalHold&) = delete;
};

// "SIGINT" for SIGINT; "signal N" for a signal without a usual name.
std::string signal_name(int signal);

// The exit status of a program that stops because of `signal`, as shells report one killed by
// it: 128 + the signal number.
inline int signal_exit_code(int signal) { return 128 + signal; }

}  // namespace mgt
