#include "core/signal_flag.hpp"

#include <cerrno>
#include <cstring>

#include "core/error.hpp"

namespace mgt {

namespace {

// All a handler may reach. Lock-free atomics are async-signal-safe.
std::atomic<int> g_signal{0};
std::atomic<bool> g_repeat_kills{false};
std::atomic<bool> g_installed{false};
static_assert(std::atomic<int>::is_always_lock_free);
static_assert(std::atomic<bool>::is_always_lock_free);
static_assert(std::atomic<unsigned>::is_always_lock_free);

// A SignalHold's state, per signal number: whether the hold still has it, its disposition from
// before the hold (written before the hold's handler is installed, read by that handler), and
// when it arrived (0: not yet; else its place in the order of arrivals).
std::atomic<bool> g_hold_active{false};
std::atomic<bool> g_held[NSIG];
struct sigaction g_before_hold[NSIG];
std::atomic<unsigned> g_arrival[NSIG];
std::atomic<unsigned> g_arrivals{0};

bool held(int signal) { return signal > 0 && signal < NSIG && g_held[signal].load(); }

extern "C" void on_signal(int signal) {
  int none = 0;
  if (g_signal.compare_exchange_strong(none, signal, std::memory_order_relaxed)) return;
  if (!g_repeat_kills.load(std::memory_order_relaxed)) return;
  // sigaction and raise are async-signal-safe.
  struct sigaction fallback;
  std::memset(&fallback, 0, sizeof fallback);
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(signal, &fallback, nullptr);
  raise(signal);
}

extern "C" void on_held_signal(int signal) {
  unsigned none = 0;
  if (g_arrival[signal].compare_exchange_strong(none, g_arrivals.fetch_add(1, std::memory_order_relaxed) + 1,
                                                std::memory_order_relaxed))
    return;
  // A second arrival: the disposition from before the hold, at once.
  sigaction(signal, &g_before_hold[signal], nullptr);
  raise(signal);
}

// Gives every signal the hold still has its disposition from before the hold back, and raises
// those that arrived: they act as they would have without the hold.
void release_hold() {
  for (int s = 1; s < NSIG; ++s) {
    if (!g_held[s].load()) continue;
    sigaction(s, &g_before_hold[s], nullptr);
    g_held[s].store(false);
    if (g_arrival[s].load() != 0) raise(s);
  }
  g_hold_active.store(false);
}

struct NamedSignal {
  int number;
  const char* name;
};
constexpr NamedSignal kNames[] = {{SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
                                  {SIGTERM, "SIGTERM"}, {SIGUSR1, "SIGUSR1"}, {SIGUSR2, "SIGUSR2"},
                                  {SIGXCPU, "SIGXCPU"}, {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"},
                                  {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
                                  {SIGILL, "SIGILL"},   {SIGABRT, "SIGABRT"}, {SIGKILL, "SIGKILL"}};

}  // namespace

SignalFlag::SignalFlag(std::initializer_list<int> signals, Policy policy) {
  bool expected = false;
  if (!g_installed.compare_exchange_strong(expected, true))
    throw Error("signal handlers are already installed");
  g_signal.store(0);
  g_repeat_kills.store(policy.repeat_kills);
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  std::vector<int> taken;  // from a SignalHold
  for (int s : signals) {
    struct sigaction previous;
    // A held signal's disposition is the one from before the hold.
    const bool from_hold = held(s);
    if (policy.leave_ignored &&
        (from_hold ? g_before_hold[s].sa_handler == SIG_IGN
                   : sigaction(s, nullptr, &previous) == 0 && previous.sa_handler == SIG_IGN))
      continue;
    if (sigaction(s, &action, &previous) != 0) {
      const std::string why = std::strerror(errno);
      for (auto it = previous_.rbegin(); it != previous_.rend(); ++it) sigaction(it->first, &it->second, nullptr);
      g_installed.store(false);
      throw Error("sigaction(" + signal_name(s) + ") failed: " + why);
    }
    if (from_hold) {
      previous = g_before_hold[s];
      taken.push_back(s);
    }
    previous_.emplace_back(s, previous);
  }
  if (!g_hold_active.load()) return;
  // Of the taken signals that arrived during the hold, the first raises the flag: it came before
  // any that reached the flag's own handler.
  int first = 0;
  unsigned first_arrival = 0;
  for (int s : taken) {
    g_held[s].store(false);
    const unsigned arrival = g_arrival[s].load();
    if (arrival != 0 && (first == 0 || arrival < first_arrival)) {
      first = s;
      first_arrival = arrival;
    }
  }
  if (first != 0) g_signal.store(first);
  release_hold();
}

SignalHold::SignalHold(std::span<const int> signals) {
  if (g_installed.load()) throw Error("internal error: signals held while a signal flag exists");
  for (int s : signals)
    if (s <= 0 || s >= NSIG) throw Error("internal error: no signal " + std::to_string(s) + " to hold");
  bool expected = false;
  if (!g_hold_active.compare_exchange_strong(expected, true)) throw Error("internal error: signals held twice");
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_held_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int s : signals) {
    g_arrival[s].store(0);
    // The previous disposition is stored before the handler that reads it can run.
    if (sigaction(s, nullptr, &g_before_hold[s]) != 0 || sigaction(s, &action, nullptr) != 0) {
      const std::string why = std::strerror(errno);
      release_hold();
      throw Error("sigaction(" + signal_name(s) + ") failed: " + why);
    }
    g_held[s].store(true);
  }
}

SignalHold::~SignalHold() {
  if (g_hold_active.load()) release_hold();
}

SignalFlag::~SignalFlag() {
  for (auto it = previous_.rbegin(); it != previous_.rend(); ++it) sigaction(it->first, &it->second, nullptr);
  g_installed.store(false);
}

const std::atomic<int>& SignalFlag::flag() const { return g_signal; }

std::string signal_name(int signal) {
  for (const auto& s : kNames)
    if (s.number == signal) return s.name;
  return "signal " + std::to_string(signal);
}

}  // namespace mgt
