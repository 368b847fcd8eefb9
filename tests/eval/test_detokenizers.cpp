#include <catch2/catch.hpp>

#include "eval/detokenizers.hpp"

using namespace mgt;

TEST_CASE("wikitext detokenizer joins contractions and number separators", "[eval]") {
  CHECK(wikitext_detokenize("the dogs ' bones") == "the dogs' bones");
  CHECK(wikitext_detokenize(" it 's") == " it's");
  CHECK(wikitext_detokenize("1 @-@ 2 , 1 @,@ 000 and 3 @.@ 5") == "1-2, 1,000 and 3.5");
}

TEST_CASE("wikitext detokenizer keeps Megatron's literal slash regex", "[eval]") {
  // re.sub(r"/' [0-9]/", r"/'[0-9]/", s): slashes and the replacement's class are literal text.
  CHECK(wikitext_detokenize("/' 5/ and /' a/") == "/'[0-9]/ and /' a/");
  CHECK(wikitext_detokenize("/' 5") == "/' 5");
  CHECK(wikitext_detokenize("/' 1/' 2/") == "/'[0-9]/' 2/");  // non-overlapping, left to right
}

TEST_CASE("wikitext detokenizer attaches punctuation to the word before", "[eval]") {
  CHECK(wikitext_detokenize("a : b ; c . d ! e ? f , g") == "a: b; c. d! e? f, g");
  CHECK(wikitext_detokenize("end .") == "end .");  // only " . " with a space after
}

TEST_CASE("wikitext detokenizer strips the inside of brackets and quotes", "[eval]") {
  CHECK(wikitext_detokenize("( a b ) [ x ] { y }") == "(a b) [x] {y}");
  CHECK(wikitext_detokenize("\" q \"") == "\"q\"");
  CHECK(wikitext_detokenize("' x '") == "'x'");
  // "s '" → "s'" runs first, the quotes are stripped, then " 's" → "'s".
  CHECK(wikitext_detokenize("\" q \" ' s '") == "\"q\"'s'");
  // Each opening bracket pairs with the first closing one after it; none: unchanged.
  CHECK(wikitext_detokenize("( a ( b ) c )") == "(a ( b) c )");
  CHECK(wikitext_detokenize("( open") == "( open");
  CHECK(wikitext_detokenize("\" \" \"") == "\"\" \"");
  CHECK(wikitext_detokenize("\"a\" \"b") == "\"a\" \"b");
  // \s is Python's Unicode whitespace: no-break spaces inside go too.
  CHECK(wikitext_detokenize("( \u00a0a\u00a0 )") == "(a)");
  CHECK(wikitext_detokenize("( a\n b )") == "(a\nb)");  // "\n " -> "\n" runs later
}

TEST_CASE("wikitext detokenizer joins heading marks, degrees, line ends and N", "[eval]") {
  CHECK(wikitext_detokenize("= = = = H = = = = = = = = = =") == "==== H ==========");
  CHECK(wikitext_detokenize("= = = x = = y = =") == "=== x == y ==");
  CHECK(wikitext_detokenize("30 \u00b0 C") == "30\u00b0C");
  CHECK(wikitext_detokenize(" x \n y \n ") == " x\ny\n");
  CHECK(wikitext_detokenize("a N b") == "a 1 b");
}

TEST_CASE("wikitext detokenizer on the first lines of WikiText-103 test", "[eval]") {
  const char* raw =
      " \n = Robert Boulter = \n \n Robert Boulter is an English film , television and theatre actor . He had a "
      "guest @-@ starring role on the television series The Bill in 2000 . \n";
  const char* expected =
      "\n= Robert Boulter =\n\nRobert Boulter is an English film, television and theatre actor. He had a "
      "guest-starring role on the television series The Bill in 2000.\n";
  CHECK(wikitext_detokenize(raw) == expected);
}

TEST_CASE("ptb detokenizer rules", "[eval]") {
  CHECK(ptb_detokenize("it 's") == "it's");
  CHECK(ptb_detokenize("a \n b") == "a\nb");
  CHECK(ptb_detokenize("do n't") == "don't");
  CHECK(ptb_detokenize("a N b") == "a1 b");
  CHECK(ptb_detokenize("$ 1") == "$1");
  CHECK(ptb_detokenize("# 1") == "#1");
}

TEST_CASE("lambada detokenizer is the identity", "[eval]") {
  CHECK(lambada_detokenize(" a , b ") == " a , b ");
  CHECK(detokenize(DetokenizerKind::kLambada, "x @-@ y") == "x @-@ y");
  CHECK(detokenize(DetokenizerKind::kWikitext, "x @-@ y") == "x-y");
  CHECK(detokenize(DetokenizerKind::kPtb, "do n't") == "don't");
}

TEST_CASE("the detokenizer is chosen by a substring of the whole path, ptb first", "[eval]") {
  CHECK(detokenizer_for_path("data/wiki.test.tokens") == DetokenizerKind::kWikitext);
  CHECK(detokenizer_for_path("/data/wikitext-103/test.txt") == DetokenizerKind::kWikitext);
  CHECK(detokenizer_for_path("ptb/wiki.test.txt") == DetokenizerKind::kPtb);
  CHECK(detokenizer_for_path("lambada_wiki.jsonl") == DetokenizerKind::kWikitext);
  CHECK(detokenizer_for_path("x/lambada.jsonl") == DetokenizerKind::kLambada);
  CHECK_FALSE(detokenizer_for_path("corpus/test.txt").has_value());
  CHECK(to_string(DetokenizerKind::kWikitext) == "wiki");
}
