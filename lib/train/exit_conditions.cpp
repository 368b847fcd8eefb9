#include "train/exit_conditions.hpp"

#include <csignal>
#include <initializer_list>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "train/train_options.hpp"

namespace mgt {

namespace {

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

std::vector<int> exit_signal_choices() {
  std::vector<int> numbers;
  for (const auto& s : kSignals) numbers.push_back(s.number);
  return numbers;
}

ExitConditions::ExitConditions(const LoggingOptions& o, Clock::time_point start)
    : ExitConditions(Settings{o.exit_interval, o.exit_duration_in_mins, o.exit_signal_handler, o.exit_signal}, start) {}

ExitConditions::ExitConditions(const Settings& settings, Clock::time_point start)
    : settings_(settings), start_(start) {
  const int signal = exit_signal_number(settings.exit_signal);
  // As Megatron's handler: every arrival only sets the flag, even under nohup. SIGTERM is handled
  // beside another exit signal: under Slurm the signal chosen with sbatch --signal comes before
  // the time limit, but a preemption still sends SIGTERM, and a run that saves is worth more
  // than the kill that default action would be.
  if (!settings_.exit_signal_handler) return;
  if (signal == SIGTERM)
    signal_flag_.emplace(std::initializer_list<int>{SIGTERM});
  else
    signal_flag_.emplace(std::initializer_list<int>{signal, SIGTERM});
}

ExitConditions::~ExitConditions() = default;

bool ExitConditions::signal_received() const { return signal_flag_ && signal_flag_->raised(); }

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
    case ExitReason::Signal:
      return "exiting program after receiving " +
             (signal_received() ? signal_name(signal_flag_->signal()) : settings_.exit_signal) + ".";
    case ExitReason::Duration: return "exiting program after " + python_float_repr(minutes_since_start(now)) + " minutes";
    case ExitReason::Interval: return "exiting program at iteration " + std::to_string(iteration);
    case ExitReason::None: break;
  }
  return {};
}

}  // namespace mgt
