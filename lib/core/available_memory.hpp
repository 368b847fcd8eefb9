// How much memory this process may still allocate before the kernel or its control group stops
// it: MemAvailable from /proc/meminfo, lowered to what the cgroup's limit leaves (cgroup v2
// memory.max less memory.current, or v1 memory.limit_in_bytes less memory.usage_in_bytes, of
// this process's group and the groups above it) and to what its RLIMIT_DATA (ulimit -d) leaves.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace mgt {

struct AvailableMemory {
  std::int64_t bytes = 0;
  std::string source;  // "MemAvailable in /proc/meminfo", "cgroup memory.max of /slurm/job_1", ...
};

// nullopt when nothing could be read (no /proc): callers then skip their check.
std::optional<AvailableMemory> available_host_memory();

// Reads the same from files under `root` instead of "/" (for tests): root/proc/meminfo,
// root/proc/self/cgroup, root/sys/fs/cgroup/... (not the resource limit, which is the process's).
std::optional<AvailableMemory> available_host_memory(const std::string& root);

// "1.5 GiB", "512.0 MiB", "12 bytes".
std::string format_bytes(double bytes);

}  // namespace mgt
