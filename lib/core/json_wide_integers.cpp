#include "core/json_wide_integers.hpp"

namespace mgt {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Whether a run of decimal digits is a number above `limit` (digits too, no leading zeros).
bool exceeds(std::string_view digits, std::string_view limit) {
  const std::size_t first = digits.find_first_not_of('0');
  if (first == std::string_view::npos) return false;
  digits.remove_prefix(first);
  if (digits.size() != limit.size()) return digits.size() > limit.size();
  return digits > limit;
}

// Only a run of 19 digits or more can be wide: most texts are passed over at this cost alone.
bool may_hold_wide_integer(std::string_view text) {
  std::size_t run = 0;
  for (const char c : text) {
    run = is_digit(c) ? run + 1 : 0;
    if (run >= 19) return true;
  }
  return false;
}

// One open object or array on the way down to a value.
struct Frame {
  bool object = false;
  bool expect_key = false;  // objects: the next string is a key
  std::string key;          // objects: the member being read
  std::size_t index = 0;    // arrays: the element being read
};

std::string path_of(const std::vector<Frame>& stack) {
  std::string path;
  for (const Frame& f : stack) {
    if (f.object) path += (path.empty() ? "" : ".") + f.key;
    else path += "[" + std::to_string(f.index) + "]";
  }
  return path;
}

}  // namespace

std::vector<WideJsonInteger> find_wide_json_integers(std::string_view text) {
  std::vector<WideJsonInteger> found;
  if (!may_hold_wide_integer(text)) return found;
  std::vector<Frame> stack;
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n;) {
    const char c = text[i];
    if (c == '"') {
      const std::size_t start = ++i;
      while (i < n && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
      const std::size_t end = i < n ? i : n;
      ++i;
      if (!stack.empty() && stack.back().object && stack.back().expect_key) {
        stack.back().key.assign(text.substr(start, end - start));
        stack.back().expect_key = false;
      }
    } else if (c == '{' || c == '[') {
      stack.push_back(Frame{c == '{', c == '{', {}, 0});
      ++i;
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
      ++i;
    } else if (c == ',') {
      if (!stack.empty()) {
        if (stack.back().object) stack.back().expect_key = true;
        else ++stack.back().index;
      }
      ++i;
    } else if (c == '-' || is_digit(c)) {
      const std::size_t start = i;
      if (c == '-') ++i;
      const std::size_t digits_start = i;
      while (i < n && is_digit(text[i])) ++i;
      const std::string_view digits = text.substr(digits_start, i - digits_start);
      const bool real = i < n && (text[i] == '.' || text[i] == 'e' || text[i] == 'E');
      while (i < n && (is_digit(text[i]) || text[i] == '.' || text[i] == 'e' || text[i] == 'E' || text[i] == '+' ||
                       text[i] == '-'))
        ++i;
      // int64 below zero, uint64 above it: what simdjson reads as an integer.
      if (!real && exceeds(digits, c == '-' ? "9223372036854775808" : "18446744073709551615"))
        found.push_back({start, std::string(text.substr(start, digits_start - start + digits.size())), path_of(stack)});
    } else {
      ++i;  // white space, ':', true, false, null
    }
  }
  return found;
}

std::string json_with_wide_integers_as_reals(std::string_view text) {
  const std::vector<WideJsonInteger> wide = find_wide_json_integers(text);
  if (wide.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size() + 2 * wide.size());
  std::size_t copied = 0;
  for (const WideJsonInteger& w : wide) {
    const std::size_t end = w.offset + w.literal.size();
    out.append(text.substr(copied, end - copied));
    out += ".0";
    copied = end;
  }
  out.append(text.substr(copied));
  return out;
}

}  // namespace mgt
