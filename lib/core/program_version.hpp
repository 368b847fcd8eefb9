// What --version prints, the same for every program: the program, the project version (set in
// CMakeLists.txt's project()) and whether the build has the CUDA backend.
#pragma once
#include <string>
#include <string_view>

namespace mgt {

// "mgt-train (mgt) 0.1.0, CPU backend" or "..., CPU and CUDA backends".
std::string version_text(std::string_view program);

// Whether an argument of argv (after the program name) is exactly "--version".
bool asks_for_version(int argc, const char* const* argv);

}  // namespace mgt
