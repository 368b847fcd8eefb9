#include "core/message_text.hpp"

#include <cstdio>

namespace mgt {

std::string quoted_for_message(std::string_view text, std::size_t longest) {
  std::string shown = "'";
  for (const char c : text.substr(0, longest)) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') shown += "\\n";
    else if (c == '\t') shown += "\\t";
    else if (c == '\r') shown += "\\r";
    else if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      shown += escaped;
    } else shown += c;
  }
  shown += "'";
  if (text.size() > longest) shown += "... (" + std::to_string(text.size()) + " bytes)";
  return shown;
}

}  // namespace mgt
