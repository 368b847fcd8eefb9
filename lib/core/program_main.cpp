#include "core/program_main.hpp"

namespace mgt {

void print_program_error(std::string_view program, std::string_view message) {
  std::size_t start = 0;
  while (true) {
    const std::size_t end = message.find('\n', start);
    const std::string_view line = message.substr(start, end == std::string_view::npos ? end : end - start);
    std::fprintf(stderr, "%.*s: %.*s\n", static_cast<int>(program.size()), program.data(),
                 static_cast<int>(line.size()), line.data());
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  std::fflush(stderr);
}

void print_ignored_flags(std::string_view program, const std::vector<IgnoredFlagUse>& ignored) {
  const std::string line = ignored_flags_line(program, ignored);
  if (line.empty()) return;
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace mgt
