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

}  // namespace mgt::dist
