#include "tokenizer/utf8_lossy.hpp"

#include "core/utf8.hpp"

namespace mgt {

std::string utf8_lossy(std::string_view bytes) {
  if (!utf8::find_invalid(bytes)) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 8);
  auto u = [&](std::size_t i) { return static_cast<unsigned char>(bytes[i]); };
  std::size_t pos = 0;
  const std::size_t n = bytes.size();
  while (pos < n) {
    const unsigned char b = u(pos);
    if (b < 0x80) {
      out += static_cast<char>(b);
      ++pos;
      continue;
    }
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b == 0xE0) { len = 3; lo = 0xA0; }
    else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) len = 3;
    else if (b == 0xED) { len = 3; hi = 0x9F; }
    else if (b == 0xF0) { len = 4; lo = 0x90; }
    else if (b >= 0xF1 && b <= 0xF3) len = 4;
    else if (b == 0xF4) { len = 4; hi = 0x8F; }
    std::size_t good = 1;  // bytes of a valid prefix; a stray byte is a subpart of one
    if (len > 0 && pos + 1 < n && u(pos + 1) >= lo && u(pos + 1) <= hi) {
      good = 2;
      while (good < len && pos + good < n && (u(pos + good) & 0xC0) == 0x80) ++good;
    }
    if (len > 0 && good == len) {
      out.append(bytes.substr(pos, len));
      pos += len;
    } else {
      out += "\xEF\xBF\xBD";
      pos += good;
    }
  }
  return out;
}

}  // namespace mgt
