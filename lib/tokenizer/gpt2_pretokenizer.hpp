// GPT-2's pre-tokenizer, which cuts text into the pieces that BPE then encodes one by one.
// Header-only: it runs once per character of every document and must inline into its callers.
#pragma once
#include <array>
#include <cstddef>
#include <string_view>

#include "core/utf8.hpp"
#include "tokenizer/unicode_class.hpp"

namespace mgt::gpt2 {

using unicode::PretokenClass;
using unicode::PretokenClasses;

// Pre-tokenizer: a hand-written matcher for
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with findall semantics. Every character is in exactly one of the classes letter, number,
// space, other, so at each position exactly one alternative wins and no backtracking is needed
// except the one-character give-back of \s+(?!\S).

constexpr std::array<PretokenClass, 128> make_ascii_classes() {
  std::array<PretokenClass, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) t[c] = PretokenClass::kLetter;
    else if (c >= '0' && c <= '9') t[c] = PretokenClass::kNumber;
    // \s in ASCII is \t \n \v \f \r and space; 0x1C-0x1F are not (unlike str.isspace()).
    else if ((c >= 0x09 && c <= 0x0D) || c == ' ') t[c] = PretokenClass::kSpace;
    else t[c] = PretokenClass::kOther;
  }
  return t;
}

inline constexpr std::array<PretokenClass, 128> kAsciiClass = make_ascii_classes();

struct CharInfo {
  PretokenClass cls;
  std::size_t len;
};

// Class and byte length of the character at text[pos]. A byte that does not start valid UTF-8
// counts as one "other" character, so malformed input is split but never rejected.
inline CharInfo char_at(std::string_view text, std::size_t pos, const PretokenClasses& classes) {
  auto b = static_cast<unsigned char>(text[pos]);
  if (b < 0x80) return {kAsciiClass[b], 1};
  std::size_t next = pos;
  char32_t cp = utf8::decode_next(text, next);
  if (cp == utf8::kInvalid) return {PretokenClass::kOther, 1};
  return {classes.of(cp), next - pos};
}

// End of the run of characters of class `cls` starting at pos.
inline std::size_t run_end(std::string_view text, std::size_t pos, PretokenClass cls,
                           const PretokenClasses& classes) {
  const std::size_t n = text.size();
  while (pos < n) {
    auto b = static_cast<unsigned char>(text[pos]);
    if (b < 0x80) {
      if (kAsciiClass[b] != cls) break;
      ++pos;
    } else {
      CharInfo c = char_at(text, pos, classes);
      if (c.cls != cls) break;
      pos += c.len;
    }
  }
  return pos;
}

// Length of a contraction ('s 't 're 've 'm 'll 'd, case-sensitive) at text[pos] == '\'', or 0.
inline std::size_t contraction_length(std::string_view text, std::size_t pos) {
  const std::size_t n = text.size();
  if (pos + 1 >= n) return 0;
  char c1 = text[pos + 1];
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (pos + 2 >= n) return 0;
  char c2 = text[pos + 2];
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

template <class Emit>
void for_each_piece(std::string_view text, Emit&& emit) {
  const PretokenClasses& classes = PretokenClasses::instance();
  const std::size_t n = text.size();
  std::size_t pos = 0;
  while (pos < n) {
    const std::size_t start = pos;
    const char b = text[pos];
    if (b == '\'') {
      if (std::size_t len = contraction_length(text, pos)) {
        emit(text.substr(start, len));
        pos += len;
        continue;
      }
    }
    CharInfo c = char_at(text, pos, classes);
    if (b == ' ' && pos + 1 < n) {
      // " ?X+": a single leading space joins a following letter, number or other run.
      CharInfo d = char_at(text, pos + 1, classes);
      if (d.cls != PretokenClass::kSpace) {
        pos = run_end(text, pos + 1 + d.len, d.cls, classes);
        emit(text.substr(start, pos - start));
        continue;
      }
    }
    if (c.cls != PretokenClass::kSpace) {
      pos = run_end(text, pos + c.len, c.cls, classes);
      emit(text.substr(start, pos - start));
      continue;
    }
    // A whitespace run. Followed by a non-space, \s+(?!\S) gives back its last character (which
    // then starts the next piece, joining it if it is a space), unless the run is one character
    // long, when \s+ takes it alone. At the end of the text the whole run is one piece.
    std::size_t last = pos;
    std::size_t end = pos + c.len;
    while (end < n) {
      CharInfo e = char_at(text, end, classes);
      if (e.cls != PretokenClass::kSpace) break;
      last = end;
      end += e.len;
    }
    if (end < n && last > start) end = last;
    emit(text.substr(start, end - start));
    pos = end;
  }
}

}  // namespace mgt::gpt2
