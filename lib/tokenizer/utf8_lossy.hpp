// Bytes to text the way Python's bytes.decode('utf-8', errors='replace') and Rust's
// String::from_utf8_lossy do it, for tokenizers whose tokens may split a character.
#pragma once
#include <string>
#include <string_view>

namespace mgt {

// Each maximal subpart of an ill-formed sequence (the longest prefix of a valid sequence, or
// one byte) becomes one U+FFFD; valid input is returned unchanged.
std::string utf8_lossy(std::string_view bytes);

}  // namespace mgt
