// Hidden test cases that launch_checks.sh runs on purpose under mpiexec: a job whose rank never
// reaches a collective (a blocking one, or one started and waited for later), and one whose rank
// dies first. All must end the whole job.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "dist/dist_testing.hpp"

using mgt::dist_test::runtime;

TEST_CASE("a rank that never reaches the collective", "[.][watchdog_hang]") {
  mgt::dist::Communicator& world = runtime().world();
  if (world.size() < 2) return;
  // Rank 1 stays away far longer than the watchdog's limit; rank 0's watchdog ends the job.
  if (world.rank() == 1) std::this_thread::sleep_for(std::chrono::minutes(10));
  std::vector<double> x = {1.0};
  world.all_reduce(std::span(x), mgt::dist::ReduceOp::Sum);
}

TEST_CASE("a rank that never starts the started collective", "[.][watchdog_hang_started]") {
  mgt::dist::Communicator& world = runtime().world();
  if (world.size() < 2) return;
  if (world.rank() == 1) std::this_thread::sleep_for(std::chrono::minutes(10));
  std::vector<float> x(3, 1.0f);
  mgt::dist::PendingCollective pending = world.start_all_reduce(mgt::dist::host_buffer(std::span(x)),
                                                                mgt::dist::ReduceOp::Sum);
  pending.wait();
}

TEST_CASE("a rank that dies before the collective", "[.][rank_exit]") {
  mgt::dist::Communicator& world = runtime().world();
  if (world.size() < 2) return;
  if (world.rank() == 1) std::_Exit(3);
  std::vector<double> x = {1.0};
  world.all_reduce(std::span(x), mgt::dist::ReduceOp::Sum);
}
