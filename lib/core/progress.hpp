// Progress of long work: a redrawn bar on a terminal, a plain log line every `log_interval`
// items otherwise (batch logs), in Megatron's wording: "Processed N documents (x docs/s, y MB/s)."
// Work that has no bytes to count (model iterations) uses counting_items(): the same lines without
// the byte rate, percentage and ETA from the item count.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace mgt {

class Progress {
public:
  // total_bytes = 0 when the input size is unknown (a pipe): no percentage and no ETA then.
  Progress(std::string item_name, std::uint64_t total_bytes, std::uint64_t log_interval);
  // Items only: update(items, 0); total_items = 0 when unknown.
  static Progress counting_items(std::string item_name, std::uint64_t total_items, std::uint64_t log_interval);
  // Ends a bar left unfinished (work abandoned), so that a message that follows gets a line of
  // its own.
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Cumulative counts so far.
  void update(std::uint64_t items, std::uint64_t bytes);
  // Final line (always printed).
  void finish(std::uint64_t items, std::uint64_t bytes);

  static bool stderr_is_terminal();

private:
  Progress(std::string item_name, std::uint64_t total, std::uint64_t log_interval, bool items_only);
  std::string line(std::uint64_t items, std::uint64_t bytes, double seconds) const;
  std::string item_name_;
  std::uint64_t total_bytes_;  // of items when items_only_
  bool items_only_ = false;
  std::uint64_t log_interval_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  std::uint64_t next_log_items_;
  bool bar_open_ = false;  // a bar is drawn and its line not ended
};

// "1:02:03" style duration.
std::string format_duration(double seconds);

}  // namespace mgt
