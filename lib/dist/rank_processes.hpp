// Which process is which rank: "host:pid" of every world rank, for the start-up line that lets a
// launcher's report of a dead process (MPICH's hydra names its PID and host, not its rank) be
// traced to the rank.
#pragma once
#include <string>
#include <vector>

#include "dist/communicator.hpp"

namespace mgt::dist {

// Collective over `world`: element r is rank r's "host:pid" (the host name cut to 55 bytes).
std::vector<std::string> gather_rank_processes(Communicator& world);

// "> rank processes: 0 vm:1234, 1 vm:1235"; past `limit` ranks, the first `limit` and a count.
std::string rank_processes_line(const std::vector<std::string>& processes, std::size_t limit = 256);

// Makes this process name its rank when it dies of a signal it can see: SIGSEGV, SIGBUS, SIGFPE,
// SIGILL or SIGABRT (a crash, an abort) first write "PROGRAM: rank R (host:pid) killed by SIGSEGV"
// to standard error, then take their default action as before (a core dump where enabled). A
// launcher names a dead process by its PID (MPICH's hydra: "PID 1235 RUNNING AT vm"); this line
// names the rank beside it. A rank killed by SIGKILL (the out-of-memory killer) can say nothing:
// the start-up line of rank processes maps its PID to its rank.
void name_rank_on_fatal_signals(int rank);

// The line name_rank_on_fatal_signals writes for `signal`.
std::string fatal_signal_line(int rank, int signal);

}  // namespace mgt::dist
