#include "eval/python_text.hpp"

#include "core/utf8.hpp"

namespace mgt::python_text {

bool is_space(char32_t c) {
  // CPython's _Py_ascii_whitespace plus the code points with bidirectional class WS, B or S or
  // general category Zs (Objects/unicodetype_db.h, _PyUnicode_IsWhitespace).
  switch (c) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D:
    case 0x1C: case 0x1D: case 0x1E: case 0x1F: case 0x20:
    case 0x85: case 0xA0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

std::size_t space_length_at(std::string_view s, std::size_t pos) {
  std::size_t next = pos;
  const char32_t c = utf8::decode_next(s, next);
  return c != utf8::kInvalid && is_space(c) ? next - pos : 0;
}

std::string_view strip(std::string_view s) {
  std::size_t begin = 0;
  while (begin < s.size()) {
    const std::size_t n = space_length_at(s, begin);
    if (n == 0) break;
    begin += n;
  }
  // The end of the last non-space character, found walking forward: UTF-8 cannot be decoded
  // backwards without knowing where characters start.
  std::size_t end = begin;
  for (std::size_t pos = begin; pos < s.size();) {
    const std::size_t n = space_length_at(s, pos);
    if (n > 0) {
      pos += n;
    } else {
      utf8::decode_next(s, pos);
      end = pos;
    }
  }
  return s.substr(begin, end - begin);
}

std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> words;
  std::size_t word_start = std::string_view::npos;
  for (std::size_t pos = 0; pos < s.size();) {
    const std::size_t n = space_length_at(s, pos);
    if (n > 0) {
      if (word_start != std::string_view::npos) words.push_back(s.substr(word_start, pos - word_start));
      word_start = std::string_view::npos;
      pos += n;
    } else {
      if (word_start == std::string_view::npos) word_start = pos;
      utf8::decode_next(s, pos);
    }
  }
  if (word_start != std::string_view::npos) words.push_back(s.substr(word_start));
  return words;
}

std::size_t count_split_parts(std::string_view s, std::string_view separator) {
  std::size_t parts = 1;
  for (std::size_t pos = s.find(separator); pos != std::string_view::npos;
       pos = s.find(separator, pos + separator.size()))
    ++parts;
  return parts;
}

}  // namespace mgt::python_text
