#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "tokenizer/null_tokenizer.hpp"

using namespace mgt;
using Ids = std::vector<TokenId>;

TEST_CASE("null tokenizer follows Megatron v0.13: eod = V, vocab V + 1", "[null]") {
  NullTokenizer t(50000);
  CHECK(t.vocab_size() == 50001);
  CHECK(t.eod() == 50000);
  CHECK_FALSE(t.pad().has_value());
  CHECK(t.class_name() == "_NullTokenizer");
  CHECK(t.tokenizer_paths().empty());
  using Options = std::vector<std::pair<std::string, std::string>>;
  CHECK(t.tokenizer_options() == Options{{"vocab_size", "50000"}});
  CHECK(t.clone()->tokenize("3 4") == Ids{3, 4});
  CHECK_THROWS_AS(NullTokenizer(-1), Error);
  CHECK_THROWS_AS(NullTokenizer(2147483647), Error);
  CHECK(NullTokenizer(0).vocab_size() == 1);
}

TEST_CASE("null tokenizer parses pieces like Python's int()", "[null]") {
  NullTokenizer t(2147483646);
  CHECK(t.tokenize("1 2 3") == Ids{1, 2, 3});
  CHECK(t.tokenize("5 6\n") == Ids{5, 6});  // int() strips the newline
  CHECK(t.tokenize("1_000 +7 \t12\t -0 007") == Ids{1000, 7, 12, 0, 7});
  CHECK(t.tokenize("\xd9\xa1\xd9\xa2 \xef\xbc\x91\xef\xbc\x92") == Ids{12, 12});  // ١٢ and １２
  CHECK(t.tokenize("1\xe2\x80\xa8") == Ids{1});  // U+2028 is whitespace to int()
  CHECK(t.tokenize("2147483646") == Ids{2147483646});
  std::vector<TokenId> appended{9};
  t.tokenize("8", appended);
  CHECK(appended == Ids{9, 8});
}

TEST_CASE("null tokenizer errors name the bad piece", "[null]") {
  NullTokenizer t(100);
  // text.split(' ') gives [''] for empty text and '' between doubled spaces.
  CHECK_THROWS_WITH(t.tokenize(""), "NullTokenizer: invalid literal for int() with base 10: ''");
  CHECK_THROWS_WITH(t.tokenize("1  2"), Catch::EndsWith("base 10: ''"));
  CHECK_THROWS_WITH(t.tokenize("1 abc 2"), Catch::EndsWith("base 10: 'abc'"));
  CHECK_THROWS_WITH(t.tokenize("1.5"), Catch::EndsWith("'1.5'"));
  CHECK_THROWS_WITH(t.tokenize("0x10"), Catch::EndsWith("'0x10'"));
  CHECK_THROWS_WITH(t.tokenize("1\t2"), Catch::EndsWith("'1\\t2'"));
  for (const char* bad : {"1__0", "_1", "1_", "+ 1", "+_1", "+", "-", "\n"}) {
    INFO(bad);
    CHECK_THROWS_AS(t.tokenize(bad), Error);
  }
  CHECK_THROWS_WITH(t.tokenize("2147483648"), Catch::Contains("does not fit"));
  CHECK_THROWS_WITH(t.tokenize("99999999999999999999999"), Catch::Contains("does not fit"));
}

TEST_CASE("null tokenizer refuses ids outside the vocabulary, which Megatron would store", "[null]") {
  NullTokenizer t(100);
  CHECK(t.tokenize("0 99 100") == Ids{0, 99, 100});  // 100 is eod
  CHECK_THROWS_WITH(t.tokenize("1 101"),
                    "NullTokenizer: token '101' is outside the vocabulary [0, 100] of --vocab-size 100");
  CHECK_THROWS_WITH(t.tokenize("-3"), Catch::Contains("'-3' is outside the vocabulary"));
  CHECK_THROWS_WITH(t.tokenize("-2147483648"), Catch::Contains("outside the vocabulary"));
}

TEST_CASE("null tokenizer detokenize joins ids with spaces", "[null]") {
  NullTokenizer t(10);
  CHECK(t.detokenize(Ids{1, 22, 10}) == "1 22 10");
  CHECK(t.detokenize(Ids{}).empty());
  CHECK(t.tokenize(t.detokenize(Ids{4, 0, 10})) == Ids{4, 0, 10});
}
