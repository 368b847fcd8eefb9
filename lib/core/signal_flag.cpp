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

struct NamedSignal {
  int number;
  const char* name;
};
constexpr NamedSignal kNames[] = {{SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
                                  {SIGTERM, "SIGTERM"}, {SIGUSR1, "SIGUSR1"}, {SIGUSR2, "SIGUSR2"},
                                  {SIGXCPU, "SIGXCPU"}, {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}};

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
  for (int s : signals) {
    struct sigaction previous;
    if (policy.leave_ignored && sigaction(s, nullptr, &previous) == 0 && previous.sa_handler == SIG_IGN)
      continue;
    if (sigaction(s, &action, &previous) != 0) {
      const std::string why = std::strerror(errno);
      for (auto it = previous_.rbegin(); it != previous_.rend(); ++it) sigaction(it->first, &it->second, nullptr);
      g_installed.store(false);
      throw Error("sigaction(" + signal_name(s) + ") failed: " + why);
    }
    previous_.emplace_back(s, previous);
  }
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
