// --profile-timeline's CSV, written the same way by the CPU and CUDA backends' profiles: one row
// per operation, in issue order, with its start and duration (on the device where there is one)
// and when the host began it, all in milliseconds from the first operation.
#pragma once
#include <string>
#include <vector>

namespace mgt {

struct TimelineRow {
  const char* op;
  double start_ms;
  double ms;
  double host_begin_ms;
};

// Writes `rows` to `path`; a file that cannot be written is a warning on standard error, not an
// error, since the run it describes has finished. Nothing is written for no rows.
void write_profile_timeline(const std::string& path, const std::vector<TimelineRow>& rows);

}  // namespace mgt
