#include "dist/collective_watchdog.hpp"

#include <cerrno>  // program_invocation_short_name (glibc)

#include <algorithm>
#include <vector>

namespace mgt::dist {

std::string describe_operation(const InFlightOperation& op) {
  std::string s = op.operation;
  if (op.reduce) s += std::string(" (") + op.reduce + ")";
  if (op.count >= 0) s += " of " + std::to_string(op.count) + " " + element_type_name(op.type);
  if (op.group) s += " on the " + *op.group;
  if (op.peer_role) s += std::string(", ") + op.peer_role + " " + std::to_string(op.peer);
  return s;
}

std::string timeout_report_line(const std::string& message) {
  // The watchdog runs below the programs and is not told their names; glibc keeps argv[0]'s
  // last component, which is the program's name however it was started (a path under a
  // launcher, a bare name from PATH).
  return std::string(program_invocation_short_name) + ": " + message;
}

std::string format_timeout(std::chrono::milliseconds timeout) {
  const auto ms = timeout.count();
  if (ms % 60000 == 0) return std::to_string(ms / 60000) + " min";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

CollectiveWatchdog::CollectiveWatchdog(std::chrono::milliseconds timeout, int world_rank,
                                       TimeoutAction on_timeout)
    : timeout_(timeout), world_rank_(world_rank), on_timeout_(std::move(on_timeout)) {
  thread_ = std::thread([this] { run(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

CollectiveWatchdog::Scope::~Scope() {
  if (watchdog_) watchdog_->finish(id_);
}

CollectiveWatchdog::Scope CollectiveWatchdog::watch(const InFlightOperation& op) {
  return watch(op, {});
}

CollectiveWatchdog::Scope CollectiveWatchdog::watch(const InFlightOperation& op,
                                                    std::function<bool()> finished) {
  // No notification: the thread polls, so starting an operation costs one uncontended lock.
  std::lock_guard lock(mutex_);
  const std::uint64_t id = next_id_++;
  in_flight_.emplace(id, Entry{op, std::chrono::steady_clock::now() + timeout_, std::move(finished)});
  return Scope(this, id);
}

void CollectiveWatchdog::finish(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  in_flight_.erase(id);
}

void CollectiveWatchdog::run() {
  // Polling a few times per timeout bounds the overshoot without waking per operation.
  const auto poll = std::clamp<std::chrono::milliseconds>(
      timeout_ / 8, std::chrono::milliseconds(1), std::chrono::milliseconds(1000));
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, poll);
    if (stopping_) break;
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::string> expired;
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      if (now < it->second.deadline) {
        ++it;
        continue;
      }
      // Queued work that completed after its call returned, not yet retired by its owner.
      if (it->second.finished && it->second.finished()) {
        it = in_flight_.erase(it);
        continue;
      }
      // Formatted under the lock: the group description lives while the operation does.
      expired.push_back("rank " + std::to_string(world_rank_.load()) + ": " +
                        describe_operation(it->second.op) + " did not finish within " +
                        format_timeout(timeout_) +
                        " (--distributed-timeout-minutes): a rank of that group died or is "
                        "stuck; ending the job");
      it = in_flight_.erase(it);
    }
    if (expired.empty()) continue;
    lock.unlock();
    for (const auto& message : expired) on_timeout_(message);
    lock.lock();
  }
}

}  // namespace mgt::dist
