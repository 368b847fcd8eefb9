#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "dist/collective_watchdog.hpp"
#include "dist/local_communicator.hpp"

using namespace mgt::dist;
using namespace std::chrono_literals;

namespace {

// Collects the watchdog's messages instead of aborting.
struct Reports {
  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<std::string> messages;

  CollectiveWatchdog::TimeoutAction action() {
    return [this](const std::string& message) {
      std::lock_guard lock(mutex);
      messages.push_back(message);
      arrived.notify_all();
    };
  }
  std::string wait_for_first() {
    std::unique_lock lock(mutex);
    arrived.wait(lock, [&] { return !messages.empty(); });
    return messages.front();
  }
};

}  // namespace

TEST_CASE("an operation past its deadline is reported with rank, operation and group",
          "[dist][watchdog]") {
  Reports reports;
  const std::string group = "data-parallel group [1, 3]";
  CollectiveWatchdog watchdog(20ms, 3, reports.action());
  {
    auto scope = watchdog.watch(InFlightOperation{"all_reduce", "sum", &group, 8,
                                                  ElementType::Float32, nullptr, -1});
    // Stays "in flight" until the report arrives, however long that takes.
    const std::string message = reports.wait_for_first();
    CHECK_THAT(message, Catch::StartsWith("rank 3: all_reduce (sum) of 8 float32 on the "
                                          "data-parallel group [1, 3] did not finish within 20 ms"));
    CHECK_THAT(message, Catch::Contains("--distributed-timeout-minutes"));
  }
  // Reported once, not again on later polls.
  std::lock_guard lock(reports.mutex);
  CHECK(reports.messages.size() == 1);
}

TEST_CASE("a timeout is reported under the program's name, as the programs' errors are", "[dist][watchdog]") {
  // This test's program is mgt-dist-tests; mgt-train's lines read "mgt-train: rank 0: ...".
  CHECK(timeout_report_line("rank 3: barrier on the world group [0, 3] did not finish within 2 s") ==
        "mgt-dist-tests: rank 3: barrier on the world group [0, 3] did not finish within 2 s");
}

TEST_CASE("operations that finish are never reported", "[dist][watchdog]") {
  Reports reports;
  {
    CollectiveWatchdog watchdog(10min, 0, reports.action());
    LocalCommunicator comm("tensor-model-parallel", 0, nullptr, &watchdog);
    std::vector<float> x(16, 1.0f);
    for (int i = 0; i < 100; ++i) comm.all_reduce(std::span(x), ReduceOp::Sum);
    comm.barrier();
  }
  CHECK(reports.messages.empty());
}

TEST_CASE("queued work is asked whether it finished before it is called stuck", "[dist][watchdog]") {
  // A collective queued on a device stream outlives its call: its scope ends when its owner sees
  // it complete, which may be long after it did.
  Reports reports;
  const std::string group = "tensor-model-parallel group [0, 1]";
  std::atomic<int> asked{0};
  CollectiveWatchdog watchdog(20ms, 1, reports.action());
  auto finished = watchdog.watch(InFlightOperation{"all_reduce", "sum", &group, 4, ElementType::Float32},
                                 [&asked] {
                                   ++asked;
                                   return true;
                                 });
  auto stuck = watchdog.watch(
      InFlightOperation{"send", nullptr, &group, 4, ElementType::Float32, "to rank", 0}, [] { return false; });
  const std::string message = reports.wait_for_first();
  CHECK_THAT(message, Catch::StartsWith("rank 1: send of 4 float32 on the tensor-model-parallel group "
                                        "[0, 1], to rank 0 did not finish within 20 ms"));
  // The finished one was asked (it is older, so at the latest in the same round) and dropped.
  CHECK(asked.load() >= 1);
  std::lock_guard lock(reports.mutex);
  CHECK(reports.messages.size() == 1);
}

TEST_CASE("operation descriptions and timeouts read well", "[dist][watchdog]") {
  const std::string group = "pipeline-model-parallel group [0, 4]";
  CHECK(describe_operation(InFlightOperation{"recv", nullptr, &group, 1024, ElementType::Int64,
                                             "from rank", 1}) ==
        "recv of 1024 int64 on the pipeline-model-parallel group [0, 4], from rank 1");
  CHECK(describe_operation(InFlightOperation{"barrier", nullptr, &group}) ==
        "barrier on the pipeline-model-parallel group [0, 4]");
  CHECK(describe_operation(InFlightOperation{"MPI_Init_thread"}) == "MPI_Init_thread");
  CHECK(format_timeout(10min) == "10 min");
  CHECK(format_timeout(2s) == "2 s");
  CHECK(format_timeout(250ms) == "250 ms");
}
