#include "core/available_memory.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

namespace mgt {

namespace {

std::optional<std::string> read_small_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A byte count as the cgroup files write it; nullopt for "max", a v1 "no limit" (close to
// 2^63) or anything unreadable.
std::optional<std::int64_t> read_bytes(const std::string& path) {
  const auto text = read_small_file(path);
  if (!text) return std::nullopt;
  long long value = 0;
  if (std::sscanf(text->c_str(), "%lld", &value) != 1 || value < 0) return std::nullopt;
  if (value >= (std::numeric_limits<long long>::max() / 2)) return std::nullopt;
  return value;
}

std::optional<std::int64_t> mem_available(const std::string& root) {
  const auto text = read_small_file(root + "/proc/meminfo");
  if (!text) return std::nullopt;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %lld kB", &kib) == 1) return kib * 1024;
  }
  return std::nullopt;
}

// "/a/b/c" -> {"/a/b/c", "/a/b", "/a", "/"}.
std::vector<std::string> self_and_ancestors(std::string group) {
  std::vector<std::string> out;
  while (!group.empty()) {
    out.push_back(group);
    if (group == "/") break;
    const auto slash = group.find_last_of('/');
    group = slash == 0 ? "/" : group.substr(0, slash);
  }
  return out;
}

struct Limit {
  std::int64_t left;
  std::string source;
};

// The tightest limit of the groups this process is in, as bytes left under it.
std::optional<Limit> cgroup_limit(const std::string& root) {
  const auto text = read_small_file(root + "/proc/self/cgroup");
  if (!text) return std::nullopt;
  std::optional<Limit> best;
  auto consider = [&](const std::string& dir, const char* limit_file, const char* usage_file,
                      const std::string& group) {
    const auto limit = read_bytes(dir + "/" + limit_file);
    if (!limit) return;
    const std::int64_t usage = read_bytes(dir + "/" + usage_file).value_or(0);
    const std::int64_t left = *limit > usage ? *limit - usage : 0;
    if (!best || left < best->left) best = Limit{left, "cgroup " + std::string(limit_file) + " of " + group};
  };
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    // "0::/path" (v2) or "4:memory:/path" (v1).
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? std::string::npos : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string group = line.substr(second + 1);
    if (controllers.empty()) {
      for (const std::string& g : self_and_ancestors(group))
        consider(root + "/sys/fs/cgroup" + (g == "/" ? "" : g), "memory.max", "memory.current", g);
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      // Inside a container the group's own directory is usually mounted as the hierarchy's
      // root, which "/" reaches.
      for (const std::string& g : self_and_ancestors(group))
        consider(root + "/sys/fs/cgroup/memory" + (g == "/" ? "" : g), "memory.limit_in_bytes",
                 "memory.usage_in_bytes", g);
    }
  }
  return best;
}

// What `ulimit -d` (RLIMIT_DATA) leaves: the limit less the data this process already has
// mapped (VmData of /proc/self/status, what the limit counts); nullopt without a limit.
std::optional<Limit> data_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_DATA, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  std::int64_t used = 0;
  if (const auto text = read_small_file("/proc/self/status")) {
    std::istringstream lines(*text);
    std::string line;
    while (std::getline(lines, line)) {
      long long kib = 0;
      if (std::sscanf(line.c_str(), "VmData: %lld kB", &kib) == 1) used = kib * 1024;
    }
  }
  const auto cap = static_cast<std::int64_t>(std::min<rlim_t>(limit.rlim_cur, std::numeric_limits<std::int64_t>::max()));
  return Limit{cap > used ? cap - used : 0, "RLIMIT_DATA (ulimit -d)"};
}

}  // namespace

std::optional<AvailableMemory> available_host_memory(const std::string& root) {
  std::optional<AvailableMemory> out;
  if (const auto bytes = mem_available(root)) out = AvailableMemory{*bytes, "MemAvailable in /proc/meminfo"};
  if (const auto limit = cgroup_limit(root); limit && (!out || limit->left < out->bytes))
    out = AvailableMemory{limit->left, limit->source};
  return out;
}

std::optional<AvailableMemory> available_host_memory() {
  std::optional<AvailableMemory> out = available_host_memory("");
  if (const auto limit = data_limit(); limit && (!out || limit->left < out->bytes))
    out = AvailableMemory{limit->left, limit->source};
  return out;
}

std::string format_bytes(double bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(static_cast<long long>(bytes)) + " bytes";
  int unit = -1;
  while (bytes >= 1024 && unit < 5) {
    bytes /= 1024;
    ++unit;
  }
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.1f %s", bytes, kUnits[unit]);
  return buffer;
}

}  // namespace mgt
