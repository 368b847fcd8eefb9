#include "ckpt/hdf5_error.hpp"

#include "core/error.hpp"

namespace mgt::ckpt::h5 {
namespace {

herr_t keep_innermost(unsigned /*n*/, const H5E_error2_t* entry, void* data) {
  // Walking downward ends at the innermost entry: the one that names the actual cause
  // ("truncated file", "Fletcher32 checksum failure"), not the API wrapper.
  if (entry->desc != nullptr && entry->desc[0] != '\0') *static_cast<std::string*>(data) = entry->desc;
  return 0;
}

// HDF5's POSIX driver describes a failed system call over several lines, with a time stamp,
// buffer address and byte counts ("file read failed: time = ...\n, filename = ..., errno = 5,
// error message = 'Input/output error', buf = ..."): keep what failed and why.
std::string one_line(std::string detail) {
  const std::string tag = "error message = '";
  const auto at = detail.find(tag);
  const auto colon = detail.find(':');
  if (at != std::string::npos && colon != std::string::npos && colon < at) {
    const auto begin = at + tag.size();
    const auto end = detail.find('\'', begin);
    if (end != std::string::npos) detail = detail.substr(0, colon) + ": " + detail.substr(begin, end - begin);
  }
  for (char& c : detail)
    if (c == '\n' || c == '\r') c = ' ';
  return detail;
}

}  // namespace

void silence_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

std::string take_error_detail() {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_innermost, &detail);
  H5Eclear2(H5E_DEFAULT);
  return one_line(detail);
}

void throw_error(const std::string& context, const char* call) {
  std::string detail = take_error_detail();
  std::string message = context + ": " + call + " failed";
  if (!detail.empty()) message += " (" + detail + ")";
  throw Error(message);
}

}  // namespace mgt::ckpt::h5
