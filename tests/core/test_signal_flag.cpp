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
