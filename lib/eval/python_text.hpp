// The few Python str operations that Megatron's zero-shot code applies to text (str.split(),
// str.strip(), len(s.split(" "))), on UTF-8 bytes with Python's own notion of whitespace
// (str.isspace, which re's \s also uses for str patterns). Using ASCII whitespace instead would
// make counts and LAMBADA's last word differ from Megatron's on texts with, say, U+00A0.
#pragma once
#include <cstddef>
#include <string_view>
#include <vector>

namespace mgt::python_text {

// str.isspace() of one code point.
bool is_space(char32_t code_point);

// Byte length of the whitespace character that starts at s[pos], 0 when s[pos] does not start
// one (malformed UTF-8 is not whitespace).
std::size_t space_length_at(std::string_view s, std::size_t pos);

// s.strip()
std::string_view strip(std::string_view s);

// s.split(): the words between runs of whitespace.
std::vector<std::string_view> split(std::string_view s);

// len(s.split(separator)) for a non-empty separator: occurrences + 1.
std::size_t count_split_parts(std::string_view s, std::string_view separator);

}  // namespace mgt::python_text
