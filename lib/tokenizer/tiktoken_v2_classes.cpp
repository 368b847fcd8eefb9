#include "tokenizer/tiktoken_v2_classes.hpp"

#include <unicode/uchar.h>

#include <vector>

namespace mgt::tiktoken_v2 {
namespace {

// ICU's own categories, with no additions for code points newer than ICU: the matcher must cut
// exactly where ICU's regex engine, the reference it replaces, cuts.
std::uint8_t icu_class(char32_t cp) {
  const auto c = static_cast<UChar32>(cp);
  if (c == '\r' || c == '\n') return kLineBreak;
  if (u_isUWhiteSpace(c)) return kBlank;
  switch (u_charType(c)) {
    case U_UPPERCASE_LETTER:
    case U_TITLECASE_LETTER:
      return kUpper;
    case U_LOWERCASE_LETTER:
      return kLower;
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return kCaseless;
    case U_NON_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_COMBINING_SPACING_MARK:
      return kMark;
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return kDigit;
    default:
      return kOther;
  }
}

std::vector<std::uint8_t> flat_classes() {
  std::vector<std::uint8_t> flat(unicode::CodePointTable::kCodePoints);
  for (char32_t cp = 0; cp < unicode::CodePointTable::kCodePoints; ++cp) flat[cp] = icu_class(cp);
  return flat;
}

}  // namespace

const Classes& Classes::instance() {
  static const Classes table;
  return table;
}

Classes::Classes() : table_(flat_classes()) {}

}  // namespace mgt::tiktoken_v2
