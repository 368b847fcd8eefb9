#include "core/program_version.hpp"


#ifndef MGT_VERSION
#error "MGT_VERSION must be defined by the build (lib/CMakeLists.txt)"
#endif

namespace mgt {

std::string version_text(std::string_view program) {
#ifdef MGT_HAVE_CUDA
  const char* backends = "CPU and CUDA backends";
#else
  const char* backends = "CPU backend";
#endif
  return std::string(program) + " (mgt) " MGT_VERSION ", " + backends;
}

bool asks_for_version(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--version") return true;
  return false;
}

}  // namespace mgt
