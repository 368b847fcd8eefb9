// UTF-8 decoding and encoding without allocation, shared by tokenizers and readers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mgt::utf8 {

inline constexpr char32_t kInvalid = 0xFFFFFFFF;

// Decodes the code point starting at s[pos] and advances pos. Returns kInvalid (advancing one
// byte) for a malformed, overlong or surrogate sequence or a truncated one.
inline char32_t decode_next(std::string_view s, std::size_t& pos) {
  auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char c = byte(pos);
  if (c < 0x80) {
    ++pos;
    return c;
  }
  int len;
  char32_t cp;
  char32_t min;
  if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
  else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
  else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
  else { ++pos; return kInvalid; }
  if (pos + len > s.size()) { ++pos; return kInvalid; }
  for (int k = 1; k < len; ++k) {
    unsigned char cc = byte(pos + k);
    if ((cc & 0xC0) != 0x80) { ++pos; return kInvalid; }
    cp = (cp << 6) | (cc & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) { ++pos; return kInvalid; }
  pos += len;
  return cp;
}

inline void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Byte offset of the first invalid sequence, or nullopt when the whole string is valid UTF-8.
inline std::optional<std::size_t> find_invalid(std::string_view s) {
  std::size_t pos = 0;
  while (pos < s.size()) {
    // Fast path over ASCII, 8 bytes at a time.
    while (pos + 8 <= s.size()) {
      std::uint64_t w;
      __builtin_memcpy(&w, s.data() + pos, 8);
      if (w & 0x8080808080808080ULL) break;
      pos += 8;
    }
    if (pos >= s.size()) break;
    std::size_t start = pos;
    if (decode_next(s, pos) == kInvalid) return start;
  }
  return std::nullopt;
}

}  // namespace mgt::utf8
