// The distributed tests' main: start the distributed runtime (MPI under mpiexec, none for a lone
// process), then run the Catch2 session on every rank.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <string>

#include "core/program_main.hpp"
#include "dist/dist_testing.hpp"
#include "dist/distributed_runtime.hpp"
#include "skipped_tests_main.hpp"

namespace {

// MGT_DIST_TEST_TIMEOUT_SECONDS: the watchdog limit, so that a test whose ranks fall out of
// step ends with a message instead of hanging (the launch checks set a short one).
std::chrono::milliseconds watchdog_timeout() {
  const char* seconds = std::getenv("MGT_DIST_TEST_TIMEOUT_SECONDS");
  return std::chrono::seconds(seconds && *seconds ? std::stoi(seconds) : 120);
}

}  // namespace

int main(int argc, char** argv) {
  return mgt::run_program("mgt-dist-tests", [&] {
    auto runtime = mgt::dist::DistributedRuntime::start(watchdog_timeout());
    mgt::dist_test::set_runtime(runtime.get());
    Catch::Session session;
    const int status = mgt::testing::run_test_session(session, argc, argv);
    mgt::dist_test::set_runtime(nullptr);
    return status;
  });
}
