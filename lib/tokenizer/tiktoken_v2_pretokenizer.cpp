#include "tokenizer/tiktoken_v2_pretokenizer.hpp"

#include <array>

#include "core/utf8.hpp"

namespace mgt::tiktoken_v2 {
namespace {

// The pattern, alternative by alternative:
//   A  [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
//   B  [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*
//   C  \p{N}
//   D   ?[^\s\p{L}\p{N}]+[\r\n/]*
//   E  \s*[\r\n]+
//   F  \s+(?!\S)
//   G  \s+
// The engine takes the first alternative that matches and, inside it, the first way that
// matches in backtracking order: an optional or greedy part tries its longest take first.
// The letter sets overlap (Lm, Lo and marks are in both, and marks are also prefixes), so A and
// B are resolved by reasoning about where the backtracking stops, not by one class per
// character as for pattern v1.

constexpr std::size_t kNoMatch = static_cast<std::size_t>(-1);

constexpr std::array<std::uint8_t, 128> make_ascii_classes() {
  std::array<std::uint8_t, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if (c >= 'A' && c <= 'Z') t[c] = kUpper;
    else if (c >= 'a' && c <= 'z') t[c] = kLower;
    else if (c >= '0' && c <= '9') t[c] = kDigit;
    else if (c == '\r' || c == '\n') t[c] = kLineBreak;
    // \s in ASCII is \t \n \v \f \r and space; 0x1C-0x1F are not White_Space.
    else if ((c >= 0x09 && c <= 0x0D) || c == ' ') t[c] = kBlank;
    else t[c] = kOther;
  }
  return t;
}

constexpr std::array<std::uint8_t, 128> kAsciiClass = make_ascii_classes();

struct Char {
  std::uint8_t cls;
  std::size_t len;
};

// A byte that does not start valid UTF-8 is one character of its own: ICU sees U+FFFD, a symbol.
inline Char char_at(std::string_view text, std::size_t pos, const Classes& classes) {
  const auto b = static_cast<unsigned char>(text[pos]);
  if (b < 0x80) return {kAsciiClass[b], 1};
  std::size_t next = pos;
  const char32_t cp = utf8::decode_next(text, next);
  if (cp == utf8::kInvalid) return {kOther, 1};
  return {classes.of(cp), next - pos};
}

// End of the run of characters in `set` that starts at pos.
inline std::size_t run_end(std::string_view text, std::size_t pos, std::uint8_t set, const Classes& classes) {
  const std::size_t n = text.size();
  while (pos < n) {
    const auto b = static_cast<unsigned char>(text[pos]);
    if (b < 0x80) {
      if (!(kAsciiClass[b] & set)) break;
      ++pos;
    } else {
      const Char c = char_at(text, pos, classes);
      if (!(c.cls & set)) break;
      pos += c.len;
    }
  }
  return pos;
}

// The upper-set run from `start`, and where A's [lower]+ may begin inside it.
struct UpperRun {
  std::size_t end;         // first character not in the upper set (or the text's end)
  std::size_t last_lower;  // end of the run's last character that is also in the lower set
};

inline UpperRun upper_run(std::string_view text, std::size_t start, const Classes& classes) {
  const std::size_t n = text.size();
  UpperRun run{start, kNoMatch};
  while (run.end < n) {
    const Char c = char_at(text, run.end, classes);
    if (!(c.cls & kUpperSet)) break;
    run.end += c.len;
    if (c.cls & kLowerSet) run.last_lower = run.end;
  }
  return run;
}

// [upper]*[lower]+ at `start`. [upper]* first takes the whole upper run. If a lower-set
// character follows, [lower]+ takes the lower run from there. Otherwise [upper]* gives back one
// character at a time until [lower]+ can start: at the run's last character that is also in the
// lower set, where [lower]+ then takes just that character (the one after it is not in the
// lower set: it is an Lu/Lt, or the run has ended on a character in neither set).
std::size_t match_upper_then_lower(std::string_view text, std::size_t start, const Classes& classes) {
  const UpperRun run = upper_run(text, start, classes);
  if (run.end < text.size()) {
    const Char c = char_at(text, run.end, classes);
    if (c.cls & kLowerSet) return run_end(text, run.end + c.len, kLowerSet, classes);
  }
  return run.last_lower;
}

// [upper]+[lower]* at `start`: the whole upper run, then the lower run after it.
std::size_t match_upper_then_any_lower(std::string_view text, std::size_t start, const Classes& classes) {
  const std::size_t end = run_end(text, start, kUpperSet, classes);
  if (end == start) return kNoMatch;
  return run_end(text, end, kLowerSet, classes);
}

inline bool is_line_break(char b) { return b == '\r' || b == '\n'; }
inline bool is_ascii_lower(char b) { return b >= 'a' && b <= 'z'; }

}  // namespace

std::size_t piece_end(std::string_view text, std::size_t pos, const Classes& classes) {
  const std::size_t n = text.size();
  // Most pieces of ASCII text are a lowercase word, alone or after a space. A lowercase letter
  // is no prefix and not in the upper set, so A's [upper]* is empty and [lower]+ takes the word;
  // after a space, the space is A's prefix.
  if (is_ascii_lower(text[pos])) return run_end(text, pos + 1, kLowerSet, classes);
  if (text[pos] == ' ' && pos + 1 < n && is_ascii_lower(text[pos + 1]))
    return run_end(text, pos + 2, kLowerSet, classes);

  const Char c = char_at(text, pos, classes);
  const bool prefix = c.cls & kPrefix;

  // A then B, each first with the optional prefix taken, then without it.
  if (prefix && pos + c.len < n) {
    if (std::size_t end = match_upper_then_lower(text, pos + c.len, classes); end != kNoMatch) return end;
  }
  if (c.cls & (kUpperSet | kLowerSet)) {
    if (std::size_t end = match_upper_then_lower(text, pos, classes); end != kNoMatch) return end;
  }
  if (prefix && pos + c.len < n) {
    if (std::size_t end = match_upper_then_any_lower(text, pos + c.len, classes); end != kNoMatch) return end;
  }
  if (c.cls & kUpperSet) {
    if (std::size_t end = match_upper_then_any_lower(text, pos, classes); end != kNoMatch) return end;
  }

  // C: one number character.
  if (c.cls & kNumber) return pos + c.len;

  // D: [\r\n/]* cannot fail, so [symbol]+ keeps its whole run.
  auto symbols_then_breaks = [&](std::size_t from) {
    std::size_t end = run_end(text, from, kSymbol, classes);
    while (end < n && (is_line_break(text[end]) || text[end] == '/')) ++end;
    return end;
  };
  if (text[pos] == ' ' && pos + 1 < n) {
    const Char d = char_at(text, pos + 1, classes);
    if (d.cls & kSymbol) return symbols_then_breaks(pos + 1 + d.len);
  }
  if (c.cls & kSymbol) return symbols_then_breaks(pos + c.len);

  // Only whitespace is left. E: \s* gives back characters until [\r\n]+ can start, at the run's
  // last line break, and [\r\n]+ ends right after it. F: \s+ gives back its last character when
  // a non-space follows, unless the run is one character long; then G takes it.
  std::size_t end = pos + c.len;
  std::size_t last = pos;
  std::size_t after_break = is_line_break(text[pos]) ? end : kNoMatch;
  while (end < n) {
    const Char e = char_at(text, end, classes);
    if (!(e.cls & kSpace)) break;
    last = end;
    end += e.len;
    if (is_line_break(text[last])) after_break = end;
  }
  if (after_break != kNoMatch) return after_break;
  if (end < n && last > pos) return last;
  return end;
}

}  // namespace mgt::tiktoken_v2
