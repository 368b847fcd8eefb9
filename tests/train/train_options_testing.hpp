// The tests' way to parse an mgt-train command line: a base set of flags plus the case's own, and
// the usage error it gives (checked to be one: exit code 2).
#pragma once
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "train/train_options.hpp"

namespace mgt::train_testing {

inline TrainOptions parse_with(const std::vector<std::string>& base, std::vector<std::string> extra,
                               int world_size = 1) {
  std::vector<std::string> args = {"mgt-train"};
  args.insert(args.end(), base.begin(), base.end());
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_train_options(static_cast<int>(argv.size()), argv.data(), world_size);
}

inline std::string usage_error_with(const std::vector<std::string>& base, std::vector<std::string> extra,
                                    int world_size = 1) {
  try {
    parse_with(base, std::move(extra), world_size);
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitUsage);
    return e.what();
  }
  FAIL("no error");
  return {};
}

}  // namespace mgt::train_testing
