#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>

#include "core/error.hpp"
#include "train/exit_conditions.hpp"

using namespace mgt;
using Clock = ExitConditions::Clock;
using std::chrono::seconds;

namespace {

ExitConditions::Settings settings() { return {}; }

bool handler_is_default(int signal) {
  struct sigaction current;
  sigaction(signal, nullptr, &current);
  return current.sa_handler == SIG_DFL;
}

}  // namespace

TEST_CASE("exit conditions: nothing set never exits", "[train]") {
  ExitConditions e(settings());
  CHECK(e.should_exit(1) == ExitReason::None);
  CHECK(e.should_exit(1000000) == ExitReason::None);
  CHECK_FALSE(e.signal_received());
}

TEST_CASE("exit conditions: exit interval", "[train]") {
  auto s = settings();
  s.exit_interval = 5;
  ExitConditions e(s);
  CHECK(e.should_exit(4) == ExitReason::None);
  CHECK(e.should_exit(5) == ExitReason::Interval);
  CHECK(e.should_exit(7) == ExitReason::None);
  CHECK(e.should_exit(10) == ExitReason::Interval);
  CHECK(e.exit_message(ExitReason::Interval, 10) == "exiting program at iteration 10");

  s.exit_interval = 0;  // Megatron: 0 is "not set"
  ExitConditions off(s);
  CHECK(off.should_exit(5) == ExitReason::None);
}

TEST_CASE("exit conditions: duration measured from the start", "[train]") {
  auto s = settings();
  s.exit_duration_in_mins = 1;
  const Clock::time_point start{};
  ExitConditions e(s, start);
  CHECK(e.should_exit(3, start + seconds(59)) == ExitReason::None);
  CHECK(e.should_exit(3, start + seconds(60)) == ExitReason::None);  // strictly more than
  CHECK(e.should_exit(3, start + seconds(61)) == ExitReason::Duration);
  CHECK(e.minutes_since_start(start + seconds(90)) == 1.5);
  // Megatron prints train_time as a Python float.
  CHECK(e.exit_message(ExitReason::Duration, 3, start + seconds(61)) == "exiting program after 1.0166666666666666 minutes");

  s.exit_interval = 3;  // the duration is checked before the interval
  ExitConditions both(s, start);
  CHECK(both.should_exit(3, start + seconds(61)) == ExitReason::Duration);
  CHECK(both.should_exit(3, start + seconds(1)) == ExitReason::Interval);
}

TEST_CASE("exit conditions: the configured signal sets the flag", "[train]") {
  REQUIRE(handler_is_default(SIGUSR1));
  {
    auto s = settings();
    s.exit_signal_handler = true;
    s.exit_signal = "SIGUSR1";
    s.exit_interval = 2;
    ExitConditions e(s);
    CHECK_FALSE(handler_is_default(SIGUSR1));
    CHECK(e.should_exit(1) == ExitReason::None);
    CHECK_THROWS_AS(ExitConditions(s), Error);  // one handler at a time
    std::raise(SIGUSR1);
    CHECK(e.signal_received());
    CHECK(e.should_exit(1) == ExitReason::Signal);
    CHECK(e.should_exit(2) == ExitReason::Signal);  // the signal comes first
    CHECK(e.exit_message(ExitReason::Signal, 1) == "exiting program after receiving SIGUSR1.");
  }
  CHECK(handler_is_default(SIGUSR1));  // the previous disposition is back

  // A new handler starts with the flag clear.
  auto s = settings();
  s.exit_signal_handler = true;
  s.exit_signal = "SIGUSR2";
  ExitConditions again(s);
  CHECK_FALSE(again.signal_received());
  std::raise(SIGUSR2);
  CHECK(again.should_exit(1) == ExitReason::Signal);
}

TEST_CASE("exit conditions: SIGTERM still stops a run whose exit signal is another", "[train]") {
  // The test runner may handle SIGTERM itself: compare with the handler it had.
  const auto handler_of = [](int signal) {
    struct sigaction current;
    sigaction(signal, nullptr, &current);
    return current.sa_handler;
  };
  const auto before = handler_of(SIGTERM);
  {
    auto s = settings();
    s.exit_signal_handler = true;
    s.exit_signal = "SIGUSR1";
    ExitConditions e(s);
    CHECK(handler_of(SIGTERM) != before);
    CHECK(e.exit_message(ExitReason::Signal, 1) == "exiting program after receiving SIGUSR1.");
    std::raise(SIGTERM);  // a preemption, say
    CHECK(e.should_exit(1) == ExitReason::Signal);
    CHECK(e.exit_message(ExitReason::Signal, 1) == "exiting program after receiving SIGTERM.");
  }
  CHECK(handler_of(SIGTERM) == before);
  CHECK(handler_is_default(SIGUSR1));
}

TEST_CASE("exit conditions: signal names", "[train]") {
  CHECK(exit_signal_number("SIGTERM") == SIGTERM);
  CHECK(exit_signal_number("SIGUSR1") == SIGUSR1);
  CHECK_THROWS_AS(exit_signal_number("SIGKILL"), Error);
  auto s = settings();
  s.exit_signal = "TERM";
  CHECK_THROWS_AS(ExitConditions(s), Error);
}
