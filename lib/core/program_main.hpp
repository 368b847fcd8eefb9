// The skeleton every program's main shares: answer --version, run the body, and turn an error
// escaping it into lines on standard error, "PROGRAM: message" (one per line of the message: a
// command line with several bad flags names each on its own line), and the exit code the error
// carries.
#pragma once
#include <cstdio>
#include <exception>
#include <new>
#include <string_view>
#include <utility>
#include <vector>

#include "core/command_line.hpp"
#include "core/error.hpp"
#include "core/program_version.hpp"

namespace mgt {

// Writes `message` to standard error, each of its lines prefixed with "PROGRAM: ".
void print_program_error(std::string_view program, std::string_view message);

// Writes ignored_flags_line() to standard error, when flags were ignored.
void print_ignored_flags(std::string_view program, const std::vector<IgnoredFlagUse>& ignored);

// body() returns the exit code of a run that did not throw.
template <class Body>
int run_program(const char* name, Body&& body) {
  try {
    return std::forward<Body>(body)();
  } catch (const Error& e) {
    print_program_error(name, e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    // Where no check estimated the memory first: say so in words rather than "std::bad_alloc".
    print_program_error(name, "out of memory: the job needs more memory than this process could allocate");
    return kExitFailure;
  } catch (const std::exception& e) {
    print_program_error(name, e.what());
    return kExitFailure;
  }
}

// The same, answering --version anywhere on the command line first, as argparse's version
// action does: it prints and exits before any other flag is looked at.
template <class Body>
int run_program(const char* name, int argc, const char* const* argv, Body&& body) {
  if (asks_for_version(argc, argv)) {
    std::printf("%s\n", version_text(name).c_str());
    return kExitOk;
  }
  return run_program(name, std::forward<Body>(body));
}

}  // namespace mgt
