#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "eval/python_text.hpp"

using namespace mgt;
using Words = std::vector<std::string_view>;

TEST_CASE("python_text whitespace is str.isspace, not only ASCII", "[eval]") {
  for (char32_t c : {U'\t', U'\n', U'\v', U'\f', U'\r', U'\x1c', U'\x1f', U' ', U'\x85', U'\xa0', U'\u1680',
                     U'\u2000', U'\u200a', U'\u2028', U'\u2029', U'\u202f', U'\u205f', U'\u3000'})
    CHECK(python_text::is_space(c));
  for (char32_t c : {U'a', U'\0', U'\x1b', U'\u200b', U'\u180e', U'\ufeff', U'_'}) CHECK_FALSE(python_text::is_space(c));
}

TEST_CASE("python_text strip removes Python whitespace at both ends only", "[eval]") {
  CHECK(python_text::strip(" \t a  b \n") == "a  b");
  CHECK(python_text::strip("\u00a0x\u3000") == "x");
  CHECK(python_text::strip("\x1c\x1d") == "");
  CHECK(python_text::strip("") == "");
  CHECK(python_text::strip("\u200bx\u200b") == "\u200bx\u200b");  // zero-width space is not space
  CHECK(python_text::strip("caf\u00e9 ") == "caf\u00e9");
}

TEST_CASE("python_text split splits at runs of Python whitespace", "[eval]") {
  CHECK(python_text::split("a  b\u00a0c\n") == Words{"a", "b", "c"});
  CHECK(python_text::split("  ").empty());
  CHECK(python_text::split("").empty());
  CHECK(python_text::split("one") == Words{"one"});
  CHECK(python_text::split("x\u2003y\u200bz") == Words{"x", "y\u200bz"});
}

TEST_CASE("python_text count_split_parts is len of str.split with a separator", "[eval]") {
  CHECK(python_text::count_split_parts("a b  c", " ") == 4);  // ['a', 'b', '', 'c']
  CHECK(python_text::count_split_parts("", " ") == 1);        // ['']
  CHECK(python_text::count_split_parts("a\nb", " ") == 1);
  CHECK(python_text::count_split_parts(" ", " ") == 2);
}
