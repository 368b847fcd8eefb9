// Text from a file or a flag shown inside an error message: one line, bounded, every byte visible.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace mgt {

// 'text' in single quotes: control bytes escaped (\n, \t, \r, \xNN), at most `longest` bytes of
// it shown, then "... (N bytes)" when there were more.
std::string quoted_for_message(std::string_view text, std::size_t longest = 80);

}  // namespace mgt
