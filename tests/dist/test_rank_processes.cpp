#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <sstream>
#include <string>

#include "dist/rank_processes.hpp"

using namespace mgt::dist;

TEST_CASE("the line of rank processes names each rank's host and pid", "[dist][rank_processes]") {
  CHECK(rank_processes_line({"vm:10", "vm:11"}) == "> rank processes (host:pid): 0 vm:10, 1 vm:11");
  CHECK(rank_processes_line({"a:1", "a:2", "b:3"}, 2) == "> rank processes (host:pid): 0 a:1, 1 a:2, ... (1 more)");
}

TEST_CASE("a rank that dies of a fatal signal names its rank and process first", "[dist][rank_processes]") {
  char path[] = "/tmp/mgt-rank-death-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    dup2(fd, STDERR_FILENO);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    name_rank_on_fatal_signals(3);
    std::raise(SIGSEGV);  // a crash: the line, then the default action
    _exit(0);
  }
  close(fd);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  std::stringstream written;
  written << std::ifstream(path).rdbuf();
  unlink(path);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGSEGV);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  CHECK(written.str() == "mgt-dist-tests: rank 3 (" + std::string(host) + ":" + std::to_string(child) +
                             ") killed by SIGSEGV\n");
}
