#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tokenizer/sentence_splitter.hpp"

using namespace mgt;
using Strings = std::vector<std::string>;

// Expected outputs are what NLTK punkt (English) gives for the same texts, as Megatron's
// preprocess_data.py runs it, with and without --keep-newlines.

TEST_CASE("sentence splitter drops whitespace between sentences", "[sentence]") {
  SentenceSplitter s(false);
  CHECK_FALSE(s.keep_newlines());
  CHECK(s.split("  Hello world.  This is Mr. Smith.\nHe said hi!  \n\nNew para here.\n") ==
        Strings{"  Hello world.", "This is Mr. Smith.", "He said hi!", "New para here."});
  CHECK(s.split("It costs $3.50 today. OK?") == Strings{"It costs $3.50 today.", "OK?"});
  CHECK(s.split("Is it? Yes! (It is.) Done") == Strings{"Is it?", "Yes!", "(It is.)", "Done"});
  CHECK(s.split("He said \"Stop.\" Then left.") == Strings{"He said \"Stop.\"", "Then left."});
  CHECK(s.split("Dr. Watson arrived at 5 p.m. yesterday. He was late.") ==
        Strings{"Dr. Watson arrived at 5 p.m. yesterday.", "He was late."});
}

TEST_CASE("sentence splitter does not break at newlines alone", "[sentence]") {
  SentenceSplitter s(false);
  CHECK(s.split("First line\nsecond line. Third.") ==
        Strings{"First line\nsecond line.", "Third."});
  CHECK(s.split("\n\nTitle\n\nThe text begins here. And ends here.\n\n") ==
        Strings{"\n\nTitle\n\nThe text begins here.", "And ends here."});
  CHECK(s.split("A.\n\nB.") == Strings{"A.", "B."});
  // U+2028 is whitespace inside a sentence; a trailing NO-BREAK SPACE is stripped.
  CHECK(s.split("One\u2028two. Three.\u00a0") == Strings{"One\u2028two.", "Three."});
}

TEST_CASE("sentence splitter gives nothing for blank text", "[sentence]") {
  SentenceSplitter s(false);
  CHECK(s.split("").empty());
  CHECK(s.split("   \n\t").empty());
  CHECK(s.split("No end") == Strings{"No end"});
}

TEST_CASE("sentence splitter with keep_newlines keeps the whitespace after sentences", "[sentence]") {
  SentenceSplitter s(true);
  CHECK(s.keep_newlines());
  CHECK(s.split("  Hello world.  This is Mr. Smith.\nHe said hi!  \n\nNew para here.\n") ==
        Strings{"  Hello world.  ", "This is Mr. Smith.\n", "He said hi!  \n\n", "New para here."});
  CHECK(s.split("A.\n\nB.") == Strings{"A.\n\n", "B."});
  CHECK(s.split("First line\nsecond line. Third.") ==
        Strings{"First line\nsecond line. ", "Third."});
  // After a closing quote or bracket punkt keeps no whitespace.
  CHECK(s.split("He said \"Stop.\" Then left.") == Strings{"He said \"Stop.\"", "Then left."});
  CHECK(s.split("Is it? Yes! (It is.) Done") == Strings{"Is it? ", "Yes! ", "(It is.)", "Done"});
  CHECK(s.split(" \n").empty());
}

TEST_CASE("sentence splitter cuts text into 1,000,000-character pieces", "[sentence]") {
  SentenceSplitter s(false);
  // 999,999 two-byte characters and 'x' fill the first piece; " y." is split on its own, so
  // its leading space stays, as with Megatron's text[i:i+1000000] slices.
  std::string text;
  for (int i = 0; i < 999999; ++i) text += "\xc3\xa9";
  text += "x y.";
  Strings sentences = s.split(text);
  REQUIRE(sentences.size() == 2);
  CHECK(sentences[0].size() == 999999 * 2 + 1);
  CHECK(sentences[1] == " y.");
}

TEST_CASE("sentence splitter clones and moves", "[sentence]") {
  SentenceSplitter s(true);
  SentenceSplitter copy = s.clone();
  CHECK(copy.keep_newlines());
  CHECK(copy.split("A. B.") == s.split("A. B."));
  SentenceSplitter moved = std::move(copy);
  CHECK(moved.split("A. B.") == Strings{"A. ", "B."});
}
