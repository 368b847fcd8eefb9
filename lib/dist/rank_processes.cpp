#include "dist/rank_processes.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>  // program_invocation_short_name (glibc)
#include <cstring>

#include "core/error.hpp"
#include "core/signal_flag.hpp"

namespace mgt::dist {

namespace {

// "vm:1234": this process as the table of rank processes names it.
std::string this_process() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
  return std::string(host).substr(0, 55) + ":" + std::to_string(getpid());
}

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

// The lines, written before the handler is installed: a handler may only write() them.
struct FatalSignalLine {
  char text[256];
  std::size_t size = 0;
};
FatalSignalLine g_lines[std::size(kFatalSignals)];

extern "C" void on_fatal_signal(int signal) {
  for (std::size_t i = 0; i < std::size(kFatalSignals); ++i) {
    if (kFatalSignals[i] != signal) continue;
    [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, g_lines[i].text, g_lines[i].size);
  }
  // SA_RESETHAND restored the default action: a fault re-executed dies of it, a sent signal is
  // sent again (it stays pending until this handler returns).
  raise(signal);
}

}  // namespace

std::vector<std::string> gather_rank_processes(Communicator& world) {
  return all_gather_text(world, this_process(), 71);
}

std::string fatal_signal_line(int rank, int signal) {
  return std::string(program_invocation_short_name) + ": rank " + std::to_string(rank) + " (" + this_process() +
         ") killed by " + signal_name(signal) + "\n";
}

void name_rank_on_fatal_signals(int rank) {
  for (std::size_t i = 0; i < std::size(kFatalSignals); ++i) {
    const std::string line = fatal_signal_line(rank, kFatalSignals[i]);
    g_lines[i].size = std::min(line.size(), sizeof g_lines[i].text);
    std::memcpy(g_lines[i].text, line.data(), g_lines[i].size);
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_handler = on_fatal_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    if (sigaction(kFatalSignals[i], &action, nullptr) != 0)
      throw Error("sigaction(" + signal_name(kFatalSignals[i]) + ") failed: " + std::strerror(errno));
  }
}

std::string rank_processes_line(const std::vector<std::string>& processes, std::size_t limit) {
  std::string line = "> rank processes (host:pid):";
  const std::size_t shown = std::min(processes.size(), limit);
  for (std::size_t r = 0; r < shown; ++r) line += (r ? ", " : " ") + std::to_string(r) + " " + processes[r];
  if (shown < processes.size()) line += ", ... (" + std::to_string(processes.size() - shown) + " more)";
  return line;
}

}  // namespace mgt::dist
