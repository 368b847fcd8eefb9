#include "kernels/cuda_check.hpp"

#include <string>

#include "core/error.hpp"

namespace mgt::cuda {

void throw_cuda_error(const char* call, const char* status, const char* file, int line) {
  std::string where = file;
  if (const auto lib = where.rfind("lib/"); lib != std::string::npos) where = where.substr(lib);
  throw Error(std::string("CUDA error: ") + call + " failed: " + status + " (" + where + ":" +
              std::to_string(line) + ")");
}

}  // namespace mgt::cuda
