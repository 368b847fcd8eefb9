// Code point classes of the GPT-2 pre-tokenizer regex: \p{L}, \p{N}, \s as Python's `regex`
// module defines them, for every code point, looked up in constant time.
#pragma once
#include <cstdint>

#include "tokenizer/code_point_table.hpp"

namespace mgt::unicode {

// The four classes the GPT-2 pattern distinguishes; every code point is in exactly one
// (no code point is both White_Space and a letter or number).
enum class PretokenClass : std::uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

class PretokenClasses {
public:
  // Built once from ICU on first use, immutable afterwards (safe to share between threads).
  static const PretokenClasses& instance();

  PretokenClass of(char32_t cp) const {
    return static_cast<PretokenClass>(table_.of(cp, static_cast<std::uint8_t>(PretokenClass::kOther)));
  }

private:
  PretokenClasses();

  CodePointTable table_;
};

}  // namespace mgt::unicode
