#include "kernels/profile_timeline.hpp"

#include <cstdio>

namespace mgt {

void write_profile_timeline(const std::string& path, const std::vector<TimelineRow>& rows) {
  if (path.empty() || rows.empty()) return;
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    std::fprintf(stderr, "warning: --profile-timeline: cannot write %s\n", path.c_str());
    return;
  }
  std::fprintf(file, "op,gpu_start_ms,gpu_ms,host_begin_ms\n");
  for (const TimelineRow& r : rows)
    std::fprintf(file, "%s,%.4f,%.4f,%.4f\n", r.op, r.start_ms, r.ms, r.host_begin_ms);
  std::fclose(file);
}

}  // namespace mgt
