// A JSON list of floats for the tests that hand random inputs to a Python reference
// (tools/reference): nine significant digits, enough to name each float32 value exactly.
#pragma once
#include <sstream>
#include <string>
#include <vector>

namespace mgt::test {

inline std::string json_list(const std::vector<float>& values) {
  std::ostringstream out;
  out.precision(9);
  out << "[";
  for (std::size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
  out << "]";
  return out.str();
}

}  // namespace mgt::test
