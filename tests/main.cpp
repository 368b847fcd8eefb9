#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "skipped_tests_main.hpp"

int main(int argc, char** argv) {
  Catch::Session session;
  return mgt::testing::run_test_session(session, argc, argv);
}
