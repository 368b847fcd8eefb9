#include "train/exit_conditions.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "train/train_options.hpp"

namespace mgt {

namespace {

// A signal handler can only reach static storage; these two are the whole of it. Lock-free
// atomics are async-signal-safe.
std::atomic<bool> g_signal_received{false};
std::atomic<bool> g_handler_installed{false};
static_assert(std::atomic<bool>::is_always_lock_free);

// The previous disposition of the handled signal, restored by the destructor.
struct sigaction g_previous_action;

extern "C" void on_exit_signal(int) { g_signal_received.store(true, std::memory_order_relaxed); }

struct SignalName {
  const char* name;
  int number;
};
constexpr SignalName kSignals[] = {{"SIGTERM", SIGTERM}, {"SIGINT", SIGINT},   {"SIGHUP", SIGHUP},
                                   {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}, {"SIGXCPU", SIGXCPU}};

}  // namespace

int exit_signal_number(const std::string& name) {
  for (const auto& s : kSignals)
    if (name == s.name) return s.number;
  throw UsageError("--exit-signal: invalid choice '" + name +
                   "' (choose from SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGXCPU)");
}

ExitConditions::ExitConditions(const LoggingOptions& o, Clock::time_point start)
    : ExitConditions(Settings{o.exit_interval, o.exit_duration_in_mins, o.exit_signal_handler, o.exit_signal}, start) {}

ExitConditions::ExitConditions(const Settings& settings, Clock::time_point start)
    : settings_(settings), start_(start), signal_(exit_signal_number(settings.exit_signal)) {
  if (!settings_.exit_signal_handler) return;
  bool expected = false;
  if (!g_handler_installed.compare_exchange_strong(expected, true))
    throw Error("the exit signal handler is already installed");
  g_signal_received.store(false);
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_exit_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // interrupted reads and writes resume; the loop polls the flag
  if (sigaction(signal_, &action, &g_previous_action) != 0) {
    g_handler_installed.store(false);
    throw Error(std::string("sigaction(") + settings_.exit_signal + ") failed: " + std::strerror(errno));
  }
  handling_signal_ = true;
}

ExitConditions::~ExitConditions() {
  if (!handling_signal_) return;
  sigaction(signal_, &g_previous_action, nullptr);
  g_handler_installed.store(false);
}

bool ExitConditions::signal_received() const {
  return handling_signal_ && g_signal_received.load(std::memory_order_relaxed);
}

double ExitConditions::minutes_since_start(Clock::time_point now) const {
  return std::chrono::duration<double>(now - start_).count() / 60.0;
}

ExitReason ExitConditions::should_exit(std::int64_t iteration, Clock::time_point now) const {
  if (signal_received()) return ExitReason::Signal;
  if (settings_.exit_duration_in_mins && *settings_.exit_duration_in_mins != 0 &&
      minutes_since_start(now) > static_cast<double>(*settings_.exit_duration_in_mins))
    return ExitReason::Duration;
  if (settings_.exit_interval && *settings_.exit_interval != 0 && iteration % *settings_.exit_interval == 0)
    return ExitReason::Interval;
  return ExitReason::None;
}

std::string ExitConditions::exit_message(ExitReason reason, std::int64_t iteration, Clock::time_point now) const {
  switch (reason) {
    case ExitReason::Signal: return "exiting program after receiving " + settings_.exit_signal + ".";
    case ExitReason::Duration: return "exiting program after " + python_float_repr(minutes_since_start(now)) + " minutes";
    case ExitReason::Interval: return "exiting program at iteration " + std::to_string(iteration);
    case ExitReason::None: break;
  }
  return {};
}

}  // namespace mgt
