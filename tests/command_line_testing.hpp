// Running a program's command-line parser on a list of arguments in tests.
#pragma once
#include <string>
#include <vector>

#include "core/error.hpp"

namespace mgt::command_line_testing {

// parse(argc, argv) on `program` followed by `args`.
template <typename Parse>
auto parse_args(Parse parse, const char* program, const std::vector<std::string>& args) {
  std::vector<const char*> argv{program};
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse(static_cast<int>(argv.size()), argv.data());
}

// The message of the usage error the arguments raise; "" when they parse.
template <typename Parse>
std::string usage_error_of(Parse parse, const char* program, const std::vector<std::string>& args) {
  try {
    parse_args(parse, program, args);
  } catch (const Error& e) {
    return e.exit_code() == kExitUsage ? e.what() : std::string("not a usage error: ") + e.what();
  }
  return "";
}

}  // namespace mgt::command_line_testing
