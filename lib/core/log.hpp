// Diagnostics go to stderr, one line each, prefixed with the rank when running distributed.
// The logger is the only global mutable state in mgt.
#pragma once
#include <string>

namespace mgt::log {

enum class Level { Debug, Info, Warning, Error };

void set_rank(int rank, int world_size);  // prefix "[rank r/n] " when world_size > 1
void set_min_level(Level level);
void write(Level level, const std::string& message);

inline void info(const std::string& m) { write(Level::Info, m); }
inline void warn(const std::string& m) { write(Level::Warning, m); }
inline void error(const std::string& m) { write(Level::Error, m); }
inline void debug(const std::string& m) { write(Level::Debug, m); }

}  // namespace mgt::log
