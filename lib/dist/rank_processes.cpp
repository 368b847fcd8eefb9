#include "dist/rank_processes.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace mgt::dist {

std::vector<std::string> gather_rank_processes(Communicator& world) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
  return all_gather_text(world, std::string(host).substr(0, 55) + ":" + std::to_string(getpid()), 71);
}

std::string rank_processes_line(const std::vector<std::string>& processes, std::size_t limit) {
  std::string line = "> rank processes (host:pid):";
  const std::size_t shown = std::min(processes.size(), limit);
  for (std::size_t r = 0; r < shown; ++r) line += (r ? ", " : " ") + std::to_string(r) + " " + processes[r];
  if (shown < processes.size()) line += ", ... (" + std::to_string(processes.size() - shown) + " more)";
  return line;
}

}  // namespace mgt::dist
