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

}  // namespace

void silence_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

std::string take_error_detail() {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_innermost, &detail);
  H5Eclear2(H5E_DEFAULT);
  return detail;
}

void throw_error(const std::string& context, const char* call) {
  std::string detail = take_error_detail();
  std::string message = context + ": " + call + " failed";
  if (!detail.empty()) message += " (" + detail + ")";
  throw Error(message);
}

}  // namespace mgt::ckpt::h5
