#include "tokenizer/tiktoken_v2_pretokenizer.hpp"

#include <array>
#include <bit>
#include <cstdint>

#include "core/utf8.hpp"
#include "tokenizer/gpt2_piece_cache.hpp"

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

inline bool is_line_break(char b) { return b == '\r' || b == '\n'; }
inline bool is_ascii_lower(char b) { return b >= 'a' && b <= 'z'; }

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

// End of the lower-set run that starts at pos: eight ASCII bytes per step, where the loop over
// characters mispredicted its exit once per word; the general loop takes over at a non-ASCII
// byte. A byte is an ASCII lowercase letter when it has no high bit, adding 0x1F sets the high
// bit (>= 'a') and adding 0x05 does not (<= 'z'). A carry out of a byte only disturbs the bytes
// after it, and it comes from a byte of 0xE1 or more, which already ends the run.
inline std::size_t lower_run_end(std::string_view text, std::size_t pos, const Classes& classes) {
  constexpr std::uint64_t kHigh = 0x8080808080808080ull;
  const std::size_t n = text.size();
  while (pos + 8 <= n) {
    const std::uint64_t x = gpt2::load64(text.data() + pos);
    const std::uint64_t lower = (x + 0x1F1F1F1F1F1F1F1Full) & ~(x + 0x0505050505050505ull) & ~x & kHigh;
    if (const std::uint64_t other = ~lower & kHigh) {
      pos += static_cast<std::size_t>(std::countr_zero(other)) / 8;
      break;
    }
    pos += 8;
  }
  while (pos < n && is_ascii_lower(text[pos])) ++pos;
  if (pos < n && static_cast<unsigned char>(text[pos]) >= 0x80) return run_end(text, pos, kLowerSet, classes);
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

// D after its first character: [\r\n/]* cannot fail, so [symbol]+ keeps its whole run.
inline std::size_t symbols_then_breaks(std::string_view text, std::size_t from, const Classes& classes) {
  std::size_t end = run_end(text, from, kSymbol, classes);
  while (end < text.size() && (is_line_break(text[end]) || text[end] == '/')) ++end;
  return end;
}

// The pieces of ASCII text that are no lowercase word, decided by their first two bytes, or
// kNoMatch for the general path. Both bytes are ASCII and pos + 1 < text.size().
inline std::size_t ascii_piece_end(std::string_view text, std::size_t pos, const Classes& classes) {
  const std::uint8_t c0 = kAsciiClass[static_cast<unsigned char>(text[pos])];
  const std::uint8_t c1 = kAsciiClass[static_cast<unsigned char>(text[pos + 1])];
  // A capital word, after an optional prefix (" The", "(The", "THE"): [A-Z]+ then, if ASCII
  // follows, A takes [a-z]+ when a lowercase letter follows and fails otherwise (no ASCII capital
  // is in the lower set), and B then takes just the capitals. The optional prefix makes no
  // difference: without it A and B find the same ends.
  const std::size_t upper = (c0 & kPrefix) && c1 == kUpper ? pos + 1 : pos;
  if (kAsciiClass[static_cast<unsigned char>(text[upper])] == kUpper) {
    std::size_t end = upper + 1;
    while (end < text.size() && text[end] >= 'A' && text[end] <= 'Z') ++end;
    if (end == text.size()) return end;
    if (static_cast<unsigned char>(text[end]) < 0x80)
      return is_ascii_lower(text[end]) ? lower_run_end(text, end + 1, classes) : end;
    return kNoMatch;
  }
  // A symbol (kOther is a prefix and a symbol) before no letter: A and B find no letter after
  // it or at it, C wants a number, and D (not starting at a space) takes the symbols.
  if (c0 == kOther && !(c1 & (kUpperSet | kLowerSet))) return symbols_then_breaks(text, pos + 1, classes);
  return kNoMatch;
}

}  // namespace

std::size_t piece_end(std::string_view text, std::size_t pos, const Classes& classes) {
  const std::size_t n = text.size();
  // Most pieces of ASCII text are a lowercase word, alone or after a space. A lowercase letter
  // is no prefix and not in the upper set, so A's [upper]* is empty and [lower]+ takes the word;
  // after a space, the space is A's prefix.
  if (is_ascii_lower(text[pos])) return lower_run_end(text, pos + 1, classes);
  if (pos + 1 < n && static_cast<unsigned char>(text[pos]) < 0x80 && static_cast<unsigned char>(text[pos + 1]) < 0x80) {
    if (text[pos] == ' ' && is_ascii_lower(text[pos + 1])) return lower_run_end(text, pos + 2, classes);
    if (const std::size_t end = ascii_piece_end(text, pos, classes); end != kNoMatch) return end;
  }

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

  // D.
  if (text[pos] == ' ' && pos + 1 < n) {
    const Char d = char_at(text, pos + 1, classes);
    if (d.cls & kSymbol) return symbols_then_breaks(text, pos + 1 + d.len, classes);
  }
  if (c.cls & kSymbol) return symbols_then_breaks(text, pos + c.len, classes);

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
