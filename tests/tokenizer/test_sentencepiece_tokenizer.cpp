#include <catch2/catch.hpp>
#include <simdjson.h>

#include <cstdio>
#include <fstream>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "golden_ids.hpp"
#include "test_paths.hpp"
#include "tokenizer/sentencepiece_tokenizer.hpp"

using namespace mgt;

namespace {

std::string model(const std::string& name) { return test::dataset_path("tokenizer-tests/" + name); }

}  // namespace

// Unigram models go through mgt's own encoder, which breaks ties between equal-scoring
// segmentations ("ab" x 100) as the Python package does (Debian's library does not).
TEST_CASE("sentencepiece: SentencePieceTokenizer on a unigram model matches Megatron", "[sentencepiece][tokenizer]") {
  test::check_golden("spm-unigram-sentencepiece.jsonl");
}

TEST_CASE("sentencepiece: GPTSentencePieceTokenizer on a unigram model matches Megatron", "[sentencepiece][tokenizer]") {
  test::check_golden("spm-unigram-gpt.jsonl");
}

TEST_CASE("sentencepiece: a unigram model breaks ties as the Python package does", "[sentencepiece][tokenizer]") {
  test::check_golden("spm-unigram-ties.jsonl");
}

TEST_CASE("sentencepiece: a long text on a unigram model gives the Python package's ids", "[sentencepiece][tokenizer]") {
  // 300,000 bytes: path scores pass 100,000, where the package rescales them.
  simdjson::dom::parser parser;
  const simdjson::dom::element golden =
      parser.load(std::string(MGT_SOURCE_DIR) + "/tests/tokenizer/golden/spm-unigram-long.json");
  std::ifstream in(test::dataset_path("tinyshakespeare.txt"), std::ios::binary);
  std::string text(static_cast<std::size_t>(int64_t(golden["bytes"])), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  REQUIRE(in.gcount() == static_cast<std::streamsize>(text.size()));
  auto tok = SentencePieceTokenizer::load(model("spm-unigram.model"), SentencePieceTokenizer::Kind::kGpt);
  REQUIRE(tok->uses_own_encoder());
  const std::vector<TokenId> ids = tok->tokenize(text);
  std::uint64_t hash = 0xCBF29CE484222325ull;
  for (TokenId id : ids) hash = (hash ^ static_cast<std::uint64_t>(id)) * 0x100000001B3ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  CHECK(static_cast<int64_t>(ids.size()) == int64_t(golden["ids"]));
  CHECK(std::string(hex) == std::string(std::string_view(golden["ids_fnv1a64"])));
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
