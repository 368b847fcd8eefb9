// Code point classes of Megatron's TikToken pattern v2, whose two letter alternatives tell
// upper from lower case and admit combining marks:
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|...
// Each code point carries the set of character classes of the pattern it belongs to, so the
// hand-written matcher tests membership with one mask.
#pragma once
#include <cstdint>

#include "tokenizer/code_point_table.hpp"

namespace mgt::tiktoken_v2 {

// Membership bits, one per character class of the pattern.
enum : std::uint8_t {
  kUpperSet = 1,    // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
  kLowerSet = 2,    // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
  kPrefix = 4,      // [^\r\n\p{L}\p{N}]
  kSymbol = 8,      // [^\s\p{L}\p{N}]
  kSpace = 16,      // \s (Unicode White_Space)
  kNumber = 32,     // \p{N}
};

// What each general category of character is a member of. Lm and Lo are in both letter sets;
// a mark (M) is in both letter sets and, being no letter, also a prefix and a symbol.
inline constexpr std::uint8_t kUpper = kUpperSet;                                  // Lu, Lt
inline constexpr std::uint8_t kLower = kLowerSet;                                  // Ll
inline constexpr std::uint8_t kCaseless = kUpperSet | kLowerSet;                   // Lm, Lo
inline constexpr std::uint8_t kMark = kUpperSet | kLowerSet | kPrefix | kSymbol;   // Mn, Mc, Me
inline constexpr std::uint8_t kDigit = kNumber;                                    // Nd, Nl, No
inline constexpr std::uint8_t kBlank = kSpace | kPrefix;                           // \s but \r \n
inline constexpr std::uint8_t kLineBreak = kSpace;                                 // \r \n
inline constexpr std::uint8_t kOther = kPrefix | kSymbol;                          // everything else

class Classes {
public:
  // Built once from ICU on first use, immutable afterwards (safe to share between threads).
  static const Classes& instance();

  std::uint8_t of(char32_t cp) const { return table_.of(cp, kOther); }

private:
  Classes();

  unicode::CodePointTable table_;
};

}  // namespace mgt::tiktoken_v2
