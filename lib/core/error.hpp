// The one error type of mgt: a message meant for a user, plus an exit code.
#pragma once
#include <stdexcept>
#include <string>

namespace mgt {

enum ExitCode : int { kExitOk = 0, kExitFailure = 1, kExitUsage = 2 };

class Error : public std::runtime_error {
public:
  explicit Error(const std::string& message, int exit_code = kExitFailure)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

private:
  int exit_code_;
};

// A usage error (bad flag, bad flag value): exit code 2.
inline Error UsageError(const std::string& message) { return Error(message, kExitUsage); }

// Appends strerror(errno) to a message about a failed system call on a path.
std::string system_error_message(const std::string& what, const std::string& path);

}  // namespace mgt
