// Tests that cannot run on this machine say so. Catch2 2.x (Debian 12's) has no SKIP(): such a
// test calls skip_test(reason) and returns. The test programs' mains (skipped_tests_main.hpp)
// count the skipped test cases and, given --skip-exit-code N, exit with N when every test case
// they ran was skipped and none failed, which ctest's SKIP_RETURN_CODE reports as
// "Not Run (Skipped)" rather than as a pass. A test case that skips should skip as a whole:
// work that can run here belongs in a test case of its own.
#pragma once
#include <catch2/catch.hpp>
#include <string>

namespace mgt::testing {

struct SkipCounts {
  bool current = false;  // the running test case called skip_test
  long cases = 0;
  long skipped = 0;
};

inline SkipCounts& skip_counts() {
  static SkipCounts counts;
  return counts;
}

// Marks the running test case skipped, with the reason in the output; the caller returns.
inline void skip_test(const std::string& reason) {
  WARN("skipped: " << reason);
  skip_counts().current = true;
}

}  // namespace mgt::testing
