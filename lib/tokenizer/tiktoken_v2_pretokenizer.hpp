// A hand-written matcher for Megatron's TikToken pattern v2 (kTikTokenPatternV2), with findall
// semantics, cutting text exactly where a backtracking regex engine (ICU) cuts it.
#pragma once
#include <cstddef>
#include <string_view>

#include "tokenizer/tiktoken_v2_classes.hpp"

namespace mgt::tiktoken_v2 {

// End of the match that starts at text[pos], pos < text.size(). The pattern matches every
// character, so matches tile the text. Bytes that are not valid UTF-8 count as one U+FFFD each,
// as the ICU path reads them.
std::size_t piece_end(std::string_view text, std::size_t pos, const Classes& classes);

template <class Emit>
void for_each_piece(std::string_view text, Emit&& emit) {
  const Classes& classes = Classes::instance();
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t end = piece_end(text, pos, classes);
    emit(text.substr(pos, end - pos));
    pos = end;
  }
}

}  // namespace mgt::tiktoken_v2
