#include "tokenizer/unicode_class.hpp"

#include <unicode/uchar.h>

#include <vector>

namespace mgt::unicode {
namespace {

// How this table relates to Python's `regex` (measured over all 0x110000 code points with
// `tools/reference/gpt2_tokenize_reference.py classes`, regex 2026.11.15, which uses Unicode 17):
// - \s is exactly Unicode White_Space (25 code points: \t \n \v \f \r, space, U+0085, U+00A0,
//   U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000). Unlike Python's
//   str.isspace(), U+001C-U+001F are not \s. ICU's u_isUWhiteSpace is the same set.
// - \p{L} and \p{N} are the general categories L* and N*. ICU 72 (Unicode 15.0) agrees on every
//   code point except 22484 that Unicode 15.1-17 newly assigned as letters (22068) or numbers
//   (416) and that ICU 72 still calls unassigned. Those are listed below and added to ICU's
//   answer, so the table equals `regex` on all code points. With an older `regex` (Unicode 15.0
//   or earlier) Megatron would call these code points "other"; no bundled text contains any.
struct Assigned {
  char32_t first;
  char32_t last;
  PretokenClass cls;
};
constexpr PretokenClass L = PretokenClass::kLetter;
constexpr PretokenClass N = PretokenClass::kNumber;
constexpr Assigned kNewerThanIcu72[] = {
    {0x558, 0x558, L},     {0x58B, 0x58C, L},     {0x88F, 0x88F, L},     {0xC5C, 0xC5C, L},
    {0xCDC, 0xCDC, L},     {0x1C89, 0x1C8A, L},   {0x208F, 0x208F, L},   {0x209D, 0x209F, L},
    {0xA7CB, 0xA7CF, L},   {0xA7D2, 0xA7D2, L},   {0xA7D4, 0xA7D4, L},   {0xA7DA, 0xA7DD, L},
    {0xA7E2, 0xA7E2, L},   {0xA7F1, 0xA7F1, L},   {0xAB6C, 0xAB6D, L},   {0x105C0, 0x105F3, L},
    {0x107BB, 0x107BF, L}, {0x10940, 0x10959, L}, {0x10D40, 0x10D49, N}, {0x10D4A, 0x10D65, L},
    {0x10D6F, 0x10D85, L}, {0x10EC2, 0x10EC7, L}, {0x10ED9, 0x10EEE, L}, {0x11380, 0x11389, L},
    {0x1138B, 0x1138B, L}, {0x1138E, 0x1138E, L}, {0x11390, 0x113B5, L}, {0x113B7, 0x113B7, L},
    {0x113D1, 0x113D1, L}, {0x113D3, 0x113D3, L}, {0x116D0, 0x116E3, N}, {0x11B0A, 0x11B0A, L},
    {0x11BC0, 0x11BE0, L}, {0x11BF0, 0x11BF9, N}, {0x11DB0, 0x11DDB, L}, {0x11DE0, 0x11DE9, N},
    {0x11DF1, 0x11DF1, L}, {0x1246F, 0x1246F, N}, {0x12475, 0x1247F, N}, {0x12550, 0x12686, N},
    {0x13460, 0x143FA, L}, {0x16100, 0x1611D, L}, {0x16130, 0x16139, N}, {0x16D40, 0x16D6C, L},
    {0x16D70, 0x16D79, N}, {0x16EA0, 0x16EB8, L}, {0x16EBB, 0x16ED3, L}, {0x16FF2, 0x16FF3, L},
    {0x16FF4, 0x16FF6, N}, {0x187F8, 0x187FF, L}, {0x18CD6, 0x18CDA, L}, {0x18CFF, 0x18CFF, L},
    {0x18D09, 0x18D20, L}, {0x18D80, 0x18DF2, L}, {0x18E00, 0x19191, L}, {0x191A0, 0x191D2, L},
    {0x1B123, 0x1B128, L}, {0x1B168, 0x1B168, L}, {0x1CCF0, 0x1CCF9, N}, {0x1D6A6, 0x1D6A6, L},
    {0x1DF1F, 0x1DF24, L}, {0x1DF2B, 0x1DF81, L}, {0x1DF90, 0x1DF96, L}, {0x1DFCD, 0x1DFFF, L},
    {0x1E5D0, 0x1E5ED, L}, {0x1E5F0, 0x1E5F0, L}, {0x1E5F1, 0x1E5FA, N}, {0x1E6C0, 0x1E6DE, L},
    {0x1E6E0, 0x1E6E2, L}, {0x1E6E4, 0x1E6E5, L}, {0x1E6E7, 0x1E6ED, L}, {0x1E6F0, 0x1E6F4, L},
    {0x1E6FE, 0x1E6FF, L}, {0x2B73A, 0x2B73F, L}, {0x2B81E, 0x2B81E, L}, {0x2CEA2, 0x2CEAD, L},
    {0x2EBF0, 0x2EE5D, L}, {0x323B0, 0x33479, L}, {0x3D000, 0x3FC3F, L},
};

PretokenClass icu_class(char32_t cp) {
  auto c = static_cast<UChar32>(cp);
  if (u_isUWhiteSpace(c)) return PretokenClass::kSpace;
  std::uint32_t mask = U_GET_GC_MASK(c);
  if (mask & U_GC_L_MASK) return PretokenClass::kLetter;
  if (mask & U_GC_N_MASK) return PretokenClass::kNumber;
  return PretokenClass::kOther;
}

// ICU's classes, with the code points assigned after ICU 72 filled in where ICU lacks them.
std::vector<std::uint8_t> flat_classes() {
  constexpr char32_t kCodePoints = CodePointTable::kCodePoints;
  std::vector<std::uint8_t> flat(kCodePoints);
  for (char32_t cp = 0; cp < kCodePoints; ++cp) flat[cp] = static_cast<std::uint8_t>(icu_class(cp));
  for (const Assigned& range : kNewerThanIcu72) {
    for (char32_t cp = range.first; cp <= range.last; ++cp) {
      // Only fill what ICU does not know yet; a newer ICU already answers the same.
      if (u_charType(static_cast<UChar32>(cp)) == U_UNASSIGNED)
        flat[cp] = static_cast<std::uint8_t>(range.cls);
    }
  }
  return flat;
}

}  // namespace

const PretokenClasses& PretokenClasses::instance() {
  static const PretokenClasses table;
  return table;
}

PretokenClasses::PretokenClasses() : table_(flat_classes()) {}

}  // namespace mgt::unicode
