#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "golden_ids.hpp"
#include "test_paths.hpp"
#include "tokenizer/sentencepiece_tokenizer.hpp"

using namespace mgt;

namespace {

std::string model(const std::string& name) { return test::dataset_path("tokenizer-tests/" + name); }

// "ab" x 100: unigram segmentations with the same pieces in another order score the same, and the
// SentencePiece library of Debian (0.1.97) breaks the tie unlike the Python package (0.2.3).
std::string repeated(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}
const std::vector<std::string> kUnigramTies = {repeated("ab", 100) + " " + std::string(40, '9')};

}  // namespace

TEST_CASE("sentencepiece: SentencePieceTokenizer on a unigram model matches Megatron", "[sentencepiece][tokenizer]") {
  test::check_golden("spm-unigram-sentencepiece.jsonl", kUnigramTies);
}

TEST_CASE("sentencepiece: GPTSentencePieceTokenizer on a unigram model matches Megatron", "[sentencepiece][tokenizer]") {
  test::check_golden("spm-unigram-gpt.jsonl", kUnigramTies);
}

TEST_CASE("sentencepiece: Llama2Tokenizer on a byte-fallback BPE model matches Megatron", "[sentencepiece][tokenizer]") {
  test::check_golden("spm-llama-bpe-llama2.jsonl");
}

TEST_CASE("sentencepiece: SentencePieceTokenizer with extra ids on a BPE model matches Megatron",
          "[sentencepiece][tokenizer]") {
  test::check_golden("spm-llama-bpe-sentencepiece.jsonl");
}

TEST_CASE("sentencepiece: Megatron's identifiers and special ids", "[sentencepiece][tokenizer]") {
  using Kind = SentencePieceTokenizer::Kind;
  auto full = SentencePieceTokenizer::load(model("spm-unigram.model"), Kind::kSentencePiece);
  CHECK(full->class_name() == "_SentencePieceTokenizer");
  CHECK(full->tokenizer_paths() == std::vector<std::string>{model("spm-unigram.model")});
  CHECK(full->tokenizer_options() == std::vector<std::pair<std::string, std::string>>{{"vocab_extra_ids", "0"}});
  // 1000 pieces, then <CLS> <SEP> <EOD> <MASK>; the model's <pad>, <s>, </s> are pieces.
  CHECK(full->vocab_size() == 1004);
  CHECK(full->eod() == 1002);
  CHECK(full->pad() == 3);
  CHECK(full->bos() == 1);
  CHECK(full->tokenize("<EOD>") == std::vector<TokenId>{1002});
  CHECK(full->detokenize(std::vector<TokenId>{1002}) == " <EOD> ");

  auto llama = SentencePieceTokenizer::load(model("spm-llama-bpe.model"), Kind::kLlama2);
  CHECK(llama->class_name() == "_Llama2Tokenizer");
  CHECK(llama->tokenize("") == std::vector<TokenId>{1});  // BOS alone
  CHECK(llama->eod() == 2);
  CHECK_FALSE(llama->pad().has_value());  // pad_id -1
  auto gpt = SentencePieceTokenizer::load(model("spm-llama-bpe.model"), Kind::kGpt);
  CHECK(gpt->class_name() == "_GPTSentencePieceTokenizer");
  CHECK(gpt->tokenize("") == std::vector<TokenId>{});
  CHECK(gpt->tokenizer_options() == std::vector<std::pair<std::string, std::string>>{{"vocab_extra_ids", "0"}});
  CHECK_THROWS_WITH(gpt->detokenize(std::vector<TokenId>{5000}), Catch::Contains("token id 5000"));
}

TEST_CASE("sentencepiece: a file that is not a model is refused with its name", "[sentencepiece][tokenizer]") {
  CHECK_THROWS_WITH(SentencePieceTokenizer::load(test::dataset_path("gpt2-merges.txt"),
                                                 SentencePieceTokenizer::Kind::kGpt),
                    Catch::Contains("SentencePiece model") && Catch::Contains("gpt2-merges.txt"));
  CHECK_THROWS_WITH(SentencePieceTokenizer::load(test::scratch_dir("spm-missing") + "/x.model",
                                                 SentencePieceTokenizer::Kind::kLlama2),
                    Catch::Contains("x.model"));
}
