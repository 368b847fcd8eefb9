#include <catch2/catch.hpp>

#include "tokenizer/tokenizer_type_inference.hpp"

using namespace mgt;

TEST_CASE("A vocabulary and a merges file without a tokenizer type select GPT2BPETokenizer", "[tokenizer]") {
  TokenizerOptions both;
  both.vocab_file = "vocab.json";
  both.merge_file = "merges.txt";
  CHECK(infer_tokenizer_type_from_files(both, "mgt-test"));
  CHECK(both.type == "GPT2BPETokenizer");

  // A type given, or one file missing, is left to the tokenizer's own checks.
  TokenizerOptions named = both;
  named.type = "HuggingFaceTokenizer";
  CHECK_FALSE(infer_tokenizer_type_from_files(named, "mgt-test"));
  CHECK(named.type == "HuggingFaceTokenizer");
  TokenizerOptions vocab_only;
  vocab_only.vocab_file = "vocab.txt";
  CHECK_FALSE(infer_tokenizer_type_from_files(vocab_only, "mgt-test"));
  CHECK(vocab_only.type.empty());
}
