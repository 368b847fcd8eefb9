// Internal to lib/ckpt (includes hdf5.h): HDF5 failures as one-line mgt::Error messages.
// HDF5 prints its error stack to stderr by default; we switch that off and instead put the call
// that failed and the library's innermost explanation into the message.
#pragma once
#include <hdf5.h>

#include <string>

namespace mgt::ckpt::h5 {

// Turns off HDF5's automatic error printing (per thread in thread-safe builds, hence called at
// every entry point rather than once).
void silence_errors();

// "CONTEXT: CALL failed (innermost HDF5 message)", then clears HDF5's error stack.
[[noreturn]] void throw_error(const std::string& context, const char* call);

// The innermost message on HDF5's current error stack ("" when empty); clears the stack.
std::string take_error_detail();

inline hid_t check_id(hid_t id, const char* call, const std::string& context) {
  if (id < 0) throw_error(context, call);
  return id;
}

inline void check(herr_t status, const char* call, const std::string& context) {
  if (status < 0) throw_error(context, call);
}

}  // namespace mgt::ckpt::h5
