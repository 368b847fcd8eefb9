// For a test program's main, after <catch2/catch.hpp> with CATCH_CONFIG_RUNNER: the listener
// that counts the test cases that called skip_test (skipped_tests.hpp), and the session run that
// turns "all skipped" into --skip-exit-code's status.
#pragma once
#include <catch2/catch.hpp>

#include "skipped_tests.hpp"

namespace mgt::testing {

class SkipListener : public Catch::TestEventListenerBase {
public:
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo& info) override {
    TestEventListenerBase::testCaseStarting(info);
    skip_counts().current = false;
  }
  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    SkipCounts& counts = skip_counts();
    ++counts.cases;
    if (counts.current) ++counts.skipped;
    TestEventListenerBase::testCaseEnded(stats);
  }
};

// 1 when a test case failed (or the command line's usage status); else 0, or the skip code when
// one was given and every test case run skipped.
inline int run_test_session(Catch::Session& session, int argc, char** argv) {
  int skip_code = 0;
  session.cli(session.cli() |
              Catch::clara::Opt(skip_code, "code")["--skip-exit-code"](
                  "exit with this status when every test case run was skipped (for ctest's SKIP_RETURN_CODE)"));
  if (const int usage = session.applyCommandLine(argc, argv); usage != 0) return usage;
  const int failed = session.run();
  if (failed != 0) return 1;
  const SkipCounts& counts = skip_counts();
  return skip_code != 0 && counts.cases > 0 && counts.skipped == counts.cases ? skip_code : 0;
}

CATCH_REGISTER_LISTENER(SkipListener)

}  // namespace mgt::testing
