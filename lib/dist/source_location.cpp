#include "dist/source_location.hpp"

namespace mgt::dist {

std::string call_name(const char* call_text) {
  std::string call = call_text;
  if (const auto paren = call.find('('); paren != std::string::npos) call.resize(paren);
  while (!call.empty() && call.back() == ' ') call.pop_back();
  return call;
}

std::string source_location(const char* file, int line) {
  std::string where = file;
  if (const auto lib = where.rfind("lib/"); lib != std::string::npos) where = where.substr(lib);
  return where + ":" + std::to_string(line);
}

}  // namespace mgt::dist
