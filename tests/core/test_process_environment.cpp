// The thread count the library takes from the environment (core/process_environment.hpp), the
// one process setting it reads there.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "core/process_environment.hpp"

using namespace mgt;

namespace {

// Sets (or, with null, unsets) a variable for the scope, restoring it afterwards.
class ScopedVariable {
public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedVariable() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;

private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("thread count: MGT_NUM_THREADS, else OpenBLAS's, else OpenMP's", "[core]") {
  ScopedVariable mgt("MGT_NUM_THREADS", nullptr), blas("OPENBLAS_NUM_THREADS", nullptr), omp("OMP_NUM_THREADS", nullptr);
  CHECK_FALSE(thread_count_from_environment().has_value());
  {
    ScopedVariable set("OMP_NUM_THREADS", "6,2");  // OpenMP's nested list: its first number
    CHECK(thread_count_from_environment() == 6);
    ScopedVariable blas_set("OPENBLAS_NUM_THREADS", "3");
    CHECK(thread_count_from_environment() == 3);
    ScopedVariable mgt_set("MGT_NUM_THREADS", "2");
    CHECK(thread_count_from_environment() == 2);
  }
  {
    ScopedVariable set("OPENBLAS_NUM_THREADS", "0");  // taken as OpenBLAS takes it: passed over
    CHECK_FALSE(thread_count_from_environment().has_value());
    ScopedVariable empty("MGT_NUM_THREADS", "");
    CHECK_FALSE(thread_count_from_environment().has_value());
  }
  for (const char* bad : {"many", "0", "-1", "4x", "1e3"}) {
    ScopedVariable set("MGT_NUM_THREADS", bad);
    try {
      thread_count_from_environment();
      FAIL("MGT_NUM_THREADS=" << bad << " accepted");
    } catch (const Error& e) {
      CHECK(e.exit_code() == kExitUsage);
    }
    CHECK_THROWS_WITH(thread_count_from_environment(),
                      std::string("MGT_NUM_THREADS: expected a whole number of threads from 1, got '") + bad + "'");
  }
}
