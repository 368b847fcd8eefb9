// Ends the whole job when a communication does not finish in time. A rank that died, or one that
// never reaches a collective, leaves its peers waiting forever inside MPI or NCCL; this thread
// watches every operation in flight and, past the deadline (--distributed-timeout-minutes),
// reports which rank waited on which operation of which group and runs its timeout action
// (in a distributed run: MPI_Abort, which makes the launcher end every rank).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "dist/comm_buffer.hpp"

namespace mgt::dist {

// An operation as the watchdog reports it. The pointers refer to storage that outlives the
// operation (string literals, the communicator's description).
struct InFlightOperation {
  const char* operation = "";      // "all_reduce", "send", ...
  const char* reduce = nullptr;    // "sum" / "max" for reductions
  const std::string* group = nullptr;  // "tensor-model-parallel group [0, 1]", or null
  std::int64_t count = -1;  // elements moved, or -1 for operations without data (barrier)
  ElementType type = ElementType::Float32;
  const char* peer_role = nullptr;  // "root", "peer", "source", ...
  int peer = -1;                    // its rank in the group
};

// "all_reduce (sum) of 8 float32 on the data-parallel group [0, 2]", "barrier on the world
// group [0, 1]", "MPI_Init_thread".
std::string describe_operation(const InFlightOperation& op);

class CollectiveWatchdog {
public:
  // Called on the watchdog thread with a one-line message. In a distributed run it does not
  // return (it aborts the job); if it does return, that operation is not reported again.
  using TimeoutAction = std::function<void(const std::string& message)>;

  CollectiveWatchdog(std::chrono::milliseconds timeout, int world_rank, TimeoutAction on_timeout);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // Marks an operation in flight for the lifetime of the returned scope (several threads may
  // each have one in flight).
  class Scope {
  public:
    Scope(Scope&& other) noexcept : watchdog_(other.watchdog_), id_(other.id_) {
      other.watchdog_ = nullptr;
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope& operator=(Scope&&) = delete;
    ~Scope();

  private:
    friend class CollectiveWatchdog;
    Scope(CollectiveWatchdog* watchdog, std::uint64_t id) : watchdog_(watchdog), id_(id) {}
    CollectiveWatchdog* watchdog_;
    std::uint64_t id_;
  };
  [[nodiscard]] Scope watch(const InFlightOperation& op);
  // For an operation that goes on after the call that started it returned (a collective queued on
  // a device stream), whose scope therefore lives until its owner sees it complete: past the
  // deadline, `finished` is asked first, and an operation it reports finished is dropped without
  // a word. It runs on the watchdog's thread with the watchdog's lock held, so it must be quick
  // and must not call the watchdog; the scope's end waits for it to return.
  [[nodiscard]] Scope watch(const InFlightOperation& op, std::function<bool()> finished);

  std::chrono::milliseconds timeout() const { return timeout_; }
  // The rank named in messages (known only once MPI has started).
  void set_world_rank(int rank) { world_rank_ = rank; }

private:
  struct Entry {
    InFlightOperation op;
    std::chrono::steady_clock::time_point deadline;
    std::function<bool()> finished;  // empty: in flight until its scope ends
  };
  void run();
  void finish(std::uint64_t id);

  const std::chrono::milliseconds timeout_;
  std::atomic<int> world_rank_;
  const TimeoutAction on_timeout_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::map<std::uint64_t, Entry> in_flight_;
  std::uint64_t next_id_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // last: started once everything above exists
};

// What a timeout action prints: "PROGRAM: MESSAGE", PROGRAM being the running program's name
// ("mgt-train: rank 0: all_reduce ... did not finish ..."), the form every error of mgt's
// programs takes (core/program_main.hpp).
std::string timeout_report_line(const std::string& message);

// "10 min", "2 s", "250 ms".
std::string format_timeout(std::chrono::milliseconds timeout);

}  // namespace mgt::dist
