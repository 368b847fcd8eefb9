#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include "core/error.hpp"
#include "core/signal_flag.hpp"

using namespace mgt;

namespace {

void (*disposition(int signal))(int) {
  struct sigaction current;
  sigaction(signal, nullptr, &current);
  return current.sa_handler;
}

}  // namespace

TEST_CASE("signal flag: a handled signal sets the flag and names itself", "[core][signal]") {
  REQUIRE(disposition(SIGUSR1) == SIG_DFL);
  REQUIRE(disposition(SIGUSR2) == SIG_DFL);
  {
    SignalFlag flag({SIGUSR1, SIGUSR2});
    CHECK_FALSE(flag.raised());
    CHECK(flag.signal() == 0);
    CHECK(disposition(SIGUSR1) != SIG_DFL);
    std::raise(SIGUSR2);
    CHECK(flag.raised());
    CHECK(flag.signal() == SIGUSR2);
    CHECK(flag.flag().load() == SIGUSR2);
    std::raise(SIGUSR1);  // the first signal is the one kept
    CHECK(flag.signal() == SIGUSR2);
    CHECK_THROWS_AS(SignalFlag({SIGUSR1}), Error);  // one at a time
  }
  CHECK(disposition(SIGUSR1) == SIG_DFL);  // previous dispositions are back
  CHECK(disposition(SIGUSR2) == SIG_DFL);

  SignalFlag again({SIGUSR1});  // starts clear
  CHECK_FALSE(again.raised());
}

TEST_CASE("signal flag: a signal ignored at the start can stay ignored", "[core][signal]") {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  struct sigaction previous;
  REQUIRE(sigaction(SIGUSR2, &ignore, &previous) == 0);
  {
    SignalFlag flag({SIGUSR1, SIGUSR2}, {.leave_ignored = true});
    CHECK(disposition(SIGUSR2) == SIG_IGN);
    CHECK(disposition(SIGUSR1) != SIG_IGN);
    std::raise(SIGUSR2);
    CHECK_FALSE(flag.raised());
  }
  {
    SignalFlag flag({SIGUSR2});  // by default it is caught all the same
    std::raise(SIGUSR2);
    CHECK(flag.signal() == SIGUSR2);
  }
  CHECK(disposition(SIGUSR2) == SIG_IGN);
  sigaction(SIGUSR2, &previous, nullptr);
}

TEST_CASE("signal flag: with repeat_kills a second signal takes the default action", "[core][signal]") {
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    SignalFlag flag({SIGUSR1}, {.repeat_kills = true});
    std::raise(SIGUSR1);
    if (flag.signal() != SIGUSR1) _exit(3);
    std::raise(SIGUSR1);  // dies here
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGUSR1);
}

TEST_CASE("signal flag: names and exit codes", "[core][signal]") {
  CHECK(signal_name(SIGINT) == "SIGINT");
  CHECK(signal_name(SIGTERM) == "SIGTERM");
  CHECK(signal_name(SIGHUP) == "SIGHUP");
  CHECK(signal_name(1000) == "signal 1000");
  CHECK(signal_exit_code(SIGINT) == 130);
  CHECK(signal_exit_code(SIGTERM) == 143);
}

namespace {

// Runs `body` in a child process (a hold and its handlers are per process) and returns how the
// child ended: its exit code, or 128 + the signal that killed it.
template <class Body>
int in_child(Body body) {
  const pid_t child = fork();
  if (child == 0) _exit(body());
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child) return -1;
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

constexpr int kHeld[] = {SIGUSR1, SIGUSR2};

}  // namespace

TEST_CASE("signal hold: a held signal that arrived raises the flag that takes it over", "[core][signal]") {
  CHECK(in_child([] {
          SignalHold hold(kHeld);
          if (disposition(SIGUSR2) == SIG_DFL) return 3;
          std::raise(SIGUSR2);  // remembered, not fatal
          SignalFlag flag({SIGUSR2, SIGTERM});
          if (flag.signal() != SIGUSR2) return 4;
          if (disposition(SIGUSR1) != SIG_DFL) return 5;  // not taken: back to its default
          std::raise(SIGUSR2);  // the flag's own handler now
          if (flag.signal() != SIGUSR2) return 6;
          return 0;
        }) == 0);
}

TEST_CASE("signal hold: the first held signal to arrive is the flag's", "[core][signal]") {
  CHECK(in_child([] {
          SignalHold hold(kHeld);
          std::raise(SIGUSR2);
          std::raise(SIGUSR1);
          SignalFlag flag({SIGUSR1, SIGUSR2});
          return flag.signal() == SIGUSR2 ? 0 : 3;
        }) == 0);
}

TEST_CASE("signal hold: a held signal the flag does not take acts as it would have", "[core][signal]") {
  // It arrived: its default action ends the program once the flag is made.
  CHECK(in_child([] {
          SignalHold hold(kHeld);
          std::raise(SIGUSR1);
          SignalFlag flag({SIGUSR2});
          return 0;
        }) == 128 + SIGUSR1);
  // The hold ends without a flag (the program stopped first): the same, at the hold's end.
  CHECK(in_child([] {
          {
            SignalHold hold(kHeld);
            std::raise(SIGUSR2);
          }
          return 0;
        }) == 128 + SIGUSR2);
  // Nothing arrived: dispositions are back, and the flag's end restores those from before the
  // hold, not the hold's handler.
  CHECK(in_child([] {
          SignalHold hold(kHeld);
          { SignalFlag flag({SIGUSR2}); }
          return disposition(SIGUSR1) == SIG_DFL && disposition(SIGUSR2) == SIG_DFL ? 0 : 3;
        }) == 0);
}

TEST_CASE("signal hold: a signal ignored before the hold stays ignored", "[core][signal]") {
  CHECK(in_child([] {
          std::signal(SIGUSR1, SIG_IGN);  // nohup's way
          {
            SignalHold hold(kHeld);
            std::raise(SIGUSR1);
          }
          return disposition(SIGUSR1) == SIG_IGN ? 0 : 3;
        }) == 0);
  CHECK(in_child([] {
          std::signal(SIGUSR1, SIG_IGN);
          SignalHold hold(kHeld);
          SignalFlag flag({SIGUSR1}, {.leave_ignored = true});
          std::raise(SIGUSR1);
          return !flag.raised() && disposition(SIGUSR1) == SIG_IGN ? 0 : 3;
        }) == 0);
}

TEST_CASE("signal hold: a second arrival takes the default action at once", "[core][signal]") {
  CHECK(in_child([] {
          SignalHold hold(kHeld);
          std::raise(SIGUSR1);
          std::raise(SIGUSR1);  // dies here
          return 0;
        }) == 128 + SIGUSR1);
}

TEST_CASE("signal hold: one per process, before any flag", "[core][signal]") {
  CHECK(in_child([] {
          {
            SignalHold hold(kHeld);
            try {
              SignalHold again(kHeld);
              return 3;
            } catch (const Error&) {
            }
          }
          SignalFlag flag({SIGUSR1});
          try {
            SignalHold late(kHeld);
            return 4;
          } catch (const Error&) {
          }
          return 0;
        }) == 0);
}
