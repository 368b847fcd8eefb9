#include "core/progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace mgt {

std::string format_duration(double seconds) {
  if (seconds < 0) seconds = 0;
  auto s = static_cast<std::uint64_t>(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llu:%02llu:%02llu", static_cast<unsigned long long>(s / 3600),
                static_cast<unsigned long long>(s / 60 % 60), static_cast<unsigned long long>(s % 60));
  return buf;
}

bool Progress::stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

Progress::Progress(std::string item_name, std::uint64_t total_bytes, std::uint64_t log_interval)
    : Progress(std::move(item_name), total_bytes, log_interval, false) {}

Progress Progress::counting_items(std::string item_name, std::uint64_t total_items, std::uint64_t log_interval) {
  return Progress(std::move(item_name), total_items, log_interval, true);
}

Progress::Progress(std::string item_name, std::uint64_t total, std::uint64_t log_interval, bool items_only)
    : item_name_(std::move(item_name)),
      total_bytes_(total),
      items_only_(items_only),
      log_interval_(log_interval == 0 ? 1 : log_interval),
      terminal_(stderr_is_terminal()),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_),
      next_log_items_(log_interval_) {}

Progress::~Progress() {
  if (bar_open_) std::fputs("\n", stderr);
}

std::string Progress::line(std::uint64_t items, std::uint64_t bytes, double seconds) const {
  if (items_only_) {
    char buf[256];
    const double rate = seconds > 0 ? items / seconds : 0.0;
    std::snprintf(buf, sizeof buf, "Processed %llu %s (%.1f %s/s).", static_cast<unsigned long long>(items),
                  item_name_.c_str(), rate, item_name_.c_str());
    std::string out = buf;
    if (total_bytes_ > 0 && items <= total_bytes_ && rate > 0) {
      std::snprintf(buf, sizeof buf, " %.1f%% ETA %s", 100.0 * items / total_bytes_,
                    format_duration((total_bytes_ - items) / rate).c_str());
      out += buf;
    }
    return out;
  }
  double rate_items = seconds > 0 ? items / seconds : 0.0;
  double rate_mb = seconds > 0 ? bytes / seconds / 1e6 : 0.0;
  char buf[256];
  std::snprintf(buf, sizeof buf, "Processed %llu %s (%.1f %s/s, %.2f MB/s).",
                static_cast<unsigned long long>(items), item_name_.c_str(), rate_items,
                item_name_ == "documents" ? "docs" : item_name_.c_str(), rate_mb);
  std::string out = buf;
  if (total_bytes_ > 0 && bytes <= total_bytes_ && rate_mb > 0) {
    double eta = (total_bytes_ - bytes) / (rate_mb * 1e6);
    std::snprintf(buf, sizeof buf, " %.1f%% ETA %s", 100.0 * bytes / total_bytes_,
                  format_duration(eta).c_str());
    out += buf;
  }
  return out;
}

void Progress::update(std::uint64_t items, std::uint64_t bytes) {
  auto now = std::chrono::steady_clock::now();
  double seconds = std::chrono::duration<double>(now - start_).count();
  if (terminal_) {
    if (now - last_draw_ < std::chrono::milliseconds(200)) return;
    last_draw_ = now;
    std::string bar;
    if (total_bytes_ > 0) {
      const double done = double(items_only_ ? items : bytes) / total_bytes_;
      int filled = static_cast<int>(30.0 * std::min<double>(1.0, done));
      bar = "[" + std::string(filled, '#') + std::string(30 - filled, '.') + "] ";
    }
    std::fprintf(stderr, "\r%s%s\033[K", bar.c_str(), line(items, bytes, seconds).c_str());
    std::fflush(stderr);
    bar_open_ = true;
  } else if (items >= next_log_items_) {
    while (next_log_items_ <= items) next_log_items_ += log_interval_;
    std::fprintf(stderr, "%s\n", line(items, bytes, seconds).c_str());
    std::fflush(stderr);
  }
}

void Progress::finish(std::uint64_t items, std::uint64_t bytes) {
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string text = line(items, bytes, seconds);
  bar_open_ = false;
  if (terminal_)
    std::fprintf(stderr, "\r%s in %s\033[K\n", text.c_str(), format_duration(seconds).c_str());
  else
    std::fprintf(stderr, "%s Done in %s.\n", text.c_str(), format_duration(seconds).c_str());
  std::fflush(stderr);
}

}  // namespace mgt
