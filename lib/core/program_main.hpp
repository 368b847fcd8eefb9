// The skeleton every program's main shares: run the body, and turn an error escaping it into one
// line on standard error, "PROGRAM: message", and the exit code the error carries.
#pragma once
#include <cstdio>
#include <exception>
#include <utility>

#include "core/error.hpp"

namespace mgt {

// body() returns the exit code of a run that did not throw.
template <class Body>
int run_program(const char* name, Body&& body) {
  try {
    return std::forward<Body>(body)();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return kExitFailure;
  }
}

}  // namespace mgt
