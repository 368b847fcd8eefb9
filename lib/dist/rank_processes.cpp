#include "dist/rank_processes.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>

namespace mgt::dist {

std::vector<std::string> gather_rank_processes(Communicator& world) {
  // Fixed-size records of int64 words, zero-padded: the host name, then the pid in the last word.
  constexpr std::size_t kWords = 8;
  constexpr std::size_t kNameBytes = (kWords - 1) * sizeof(std::int64_t);
  std::array<std::int64_t, kWords> mine{};
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
  std::memcpy(mine.data(), host, std::min(std::strlen(host), kNameBytes - 1));
  mine.back() = static_cast<std::int64_t>(getpid());
  std::vector<std::int64_t> all(kWords * static_cast<std::size_t>(world.size()));
  world.all_gather(std::span<const std::int64_t>(mine), std::span<std::int64_t>(all));
  std::vector<std::string> processes;
  for (std::size_t r = 0; r < static_cast<std::size_t>(world.size()); ++r) {
    char name[kNameBytes];
    std::memcpy(name, all.data() + r * kWords, kNameBytes);
    name[kNameBytes - 1] = '\0';
    processes.push_back(std::string(name) + ":" + std::to_string(all[r * kWords + kWords - 1]));
  }
  return processes;
}

std::string rank_processes_line(const std::vector<std::string>& processes, std::size_t limit) {
  std::string line = "> rank processes (host:pid):";
  const std::size_t shown = std::min(processes.size(), limit);
  for (std::size_t r = 0; r < shown; ++r) line += (r ? ", " : " ") + std::to_string(r) + " " + processes[r];
  if (shown < processes.size()) line += ", ... (" + std::to_string(processes.size() - shown) + " more)";
  return line;
}

}  // namespace mgt::dist
