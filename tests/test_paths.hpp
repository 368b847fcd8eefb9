// Where tests find bundled data and a scratch directory.
#pragma once
#include <filesystem>
#include <string>

namespace mgt::test {

inline std::string dataset_path(const std::string& name) {
  return std::string(MGT_SOURCE_DIR) + "/datasets/" + name;
}

// A fresh, empty directory under the build tree, unique per test name.
inline std::string scratch_dir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::path(MGT_BINARY_DIR) / "test-scratch" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace mgt::test
