// Argument checks shared by the CPU kernels: a bad size is a programming error in the caller, but
// it must surface as an mgt::Error with a readable message rather than as memory corruption.
#pragma once
#include <cstdint>
#include <string>

#include "core/error.hpp"

namespace mgt::cpu {

inline void require(bool ok, const char* kernel, const char* what) {
  if (!ok) throw Error(std::string(kernel) + ": " + what);
}

inline void require_nonnegative(int64_t value, const char* kernel, const char* name) {
  if (value < 0) throw Error(std::string(kernel) + ": " + name + " must be >= 0");
}

}  // namespace mgt::cpu
