#include "core/log.hpp"

#include <cstdio>
#include <mutex>

namespace mgt::log {
namespace {
struct LoggerState {
  std::mutex mutex;
  int rank = 0;
  int world_size = 1;
  Level min_level = Level::Info;
};
LoggerState& state() {
  static LoggerState s;
  return s;
}
}  // namespace

void set_rank(int rank, int world_size) {
  std::lock_guard lock(state().mutex);
  state().rank = rank;
  state().world_size = world_size;
}

void set_min_level(Level level) {
  std::lock_guard lock(state().mutex);
  state().min_level = level;
}

void write(Level level, const std::string& message) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (level < s.min_level) return;
  const char* tag = level == Level::Warning ? "warning: " : level == Level::Error ? "error: " : "";
  if (s.world_size > 1)
    std::fprintf(stderr, "[rank %d/%d] %s%s\n", s.rank, s.world_size, tag, message.c_str());
  else
    std::fprintf(stderr, "%s%s\n", tag, message.c_str());
  std::fflush(stderr);
}

}  // namespace mgt::log
