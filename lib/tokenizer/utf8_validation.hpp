// Well-formed UTF-8 as SentencePiece's DecodeUTF8 accepts it, for mgt's own SentencePiece encoders,
// which leave any other text to the library.
#pragma once
#include <cstddef>
#include <string_view>

namespace mgt {

// The length of the UTF-8 sequence at p (p < end), 0 when it is not well-formed: overlong forms,
// surrogates and code points above U+10FFFF are refused, as the library's DecodeUTF8 does.
std::size_t utf8_length(const unsigned char* p, const unsigned char* end);

bool valid_utf8(std::string_view s);

// Lengths of well-formed sequences, by lead byte (for text validated already).
inline std::size_t utf8_char_length(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

}  // namespace mgt
