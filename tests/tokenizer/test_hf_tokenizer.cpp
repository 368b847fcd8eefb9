#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "golden_ids.hpp"
#include "test_paths.hpp"
#include "tokenizer/hf_tokenizer.hpp"

using namespace mgt;

namespace {

std::string model_dir(const std::string& name) { return test::dataset_path("tokenizer-tests/" + name); }

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

// A directory with tokenizer.json = `json` and a config naming eos.
std::string scratch_tokenizer(const std::string& name, const std::string& json) {
  const std::string dir = test::scratch_dir(name);
  write_file(dir + "/tokenizer.json", json);
  write_file(dir + "/tokenizer_config.json", R"({"eos_token": "a"})");
  return dir;
}

const char* kTinyModel = R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";

}  // namespace

TEST_CASE("hf: GPT-2-style byte-level BPE ids match transformers", "[hf][tokenizer]") {
  test::check_golden("hf-gpt2-bpe.jsonl");
}

TEST_CASE("hf: Llama 3-style Split + ByteLevel with a BOS template matches transformers", "[hf][tokenizer]") {
  test::check_golden("hf-llama3-bpe.jsonl");
}

TEST_CASE("hf: Qwen2-style NFC + Split matches transformers", "[hf][tokenizer]") {
  test::check_golden("hf-qwen2-bpe.jsonl");
}

TEST_CASE("hf: Llama 2-style Prepend + Replace normalizer with byte fallback matches tokenizers", "[hf][tokenizer]") {
  test::check_golden("hf-llama2-bpe.jsonl");
}

TEST_CASE("hf: Llama 2-style Metaspace pre-tokenizer (prepend_scheme first) matches tokenizers", "[hf][tokenizer]") {
  test::check_golden("hf-llama2-metaspace.jsonl");
}

TEST_CASE("hf: Metaspace splitting on every space (prepend_scheme always) matches tokenizers", "[hf][tokenizer]") {
  test::check_golden("hf-metaspace-split.jsonl");
}

TEST_CASE("hf: a plain-string vocabulary starts words from characters", "[hf][tokenizer]") {
  // No pre-tokenizer and no ByteLevel: "é" is one symbol, not two bytes; a character outside the
  // vocabulary without byte fallback is one <unk> (fused with its neighbours), and decoding
  // without a decoder joins the tokens with spaces, as tokenizers does.
  const std::string dir = scratch_tokenizer(
      "hf-plain",
      R"({"model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "vocab": {"<unk>": 0, "é": 1, "t": 2, "ét": 3}, )"
      R"("merges": [["é", "t"]]}})");
  auto tok = HuggingFaceTokenizer::load(dir);
  CHECK(tok->tokenize("étxyét") == std::vector<TokenId>{3, 0, 3});
  CHECK(tok->detokenize(std::vector<TokenId>{3, 2}) == "ét t");
}

TEST_CASE("hf: Megatron's identifiers and special ids", "[hf][tokenizer]") {
  auto llama = HuggingFaceTokenizer::load(model_dir("hf-llama3-bpe"));
  CHECK(llama->class_name() == "_HuggingFaceTokenizer");
  CHECK(llama->tokenizer_paths() == std::vector<std::string>{model_dir("hf-llama3-bpe")});
  CHECK(llama->tokenizer_options().empty());
  CHECK(llama->bos() == 0);  // <|begin_of_text|>
  CHECK(llama->eod() == 1);  // <|end_of_text|>
  CHECK_FALSE(llama->pad().has_value());
  // The template adds <|begin_of_text|>; special tokens in the text are matched whole.
  CHECK(llama->tokenize("<|end_of_text|>") == std::vector<TokenId>{0, 1});

  // A tokenizer.json path reads the configuration beside it.
  auto qwen = HuggingFaceTokenizer::load(model_dir("hf-qwen2-bpe") + "/tokenizer.json");
  CHECK(qwen->eod() == 702);   // <|im_end|>
  CHECK(qwen->pad() == 700);   // <|endoftext|>
  CHECK_FALSE(qwen->bos().has_value());
  CHECK(qwen->pretokenize("Hello  world123\n\n x") ==
        std::vector<std::string>{"Hello", " ", " world", "1", "2", "3", "\n\n", " x"});
}

TEST_CASE("hf: unsupported tokenizer.json features are refused by name", "[hf][tokenizer]") {
  const std::string wordpiece = scratch_tokenizer(
      "hf-wordpiece", R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}, "pre_tokenizer": {"type": "ByteLevel"}})");
  CHECK_THROWS_WITH(HuggingFaceTokenizer::load(wordpiece),
                    Catch::Contains("the model \"WordPiece\" is not supported") && Catch::Contains("tokenizer.json"));
  const std::string unigram = scratch_tokenizer("hf-unigram", R"({"model": {"type": "Unigram", "vocab": []}})");
  CHECK_THROWS_WITH(HuggingFaceTokenizer::load(unigram), Catch::Contains("\"Unigram\" is not supported"));
  const std::string lower = scratch_tokenizer(
      "hf-lowercase", std::string(R"({"normalizer": {"type": "Lowercase"}, "pre_tokenizer": {"type": "ByteLevel"}, )") +
                          kTinyModel + "}");
  CHECK_THROWS_WITH(HuggingFaceTokenizer::load(lower), Catch::Contains("the normalizer \"Lowercase\""));
  const std::string whitespace = scratch_tokenizer(
      "hf-whitespace", std::string(R"({"pre_tokenizer": {"type": "Whitespace"}, )") + kTinyModel + "}");
  CHECK_THROWS_WITH(HuggingFaceTokenizer::load(whitespace), Catch::Contains("the pre-tokenizer \"Whitespace\""));
  const std::string regex_replace = scratch_tokenizer(
      "hf-regex-replace",
      std::string(R"({"normalizer": {"type": "Replace", "pattern": {"Regex": " +"}, "content": "▁"}, )") + kTinyModel +
          "}");
  CHECK_THROWS_WITH(HuggingFaceTokenizer::load(regex_replace),
                    Catch::Contains("the Replace normalizer with a Regex pattern is not supported"));
  const std::string scheme = scratch_tokenizer(
      "hf-metaspace-scheme",
      std::string(R"({"pre_tokenizer": {"type": "Metaspace", "prepend_scheme": "sometimes"}, )") + kTinyModel + "}");
  CHECK_THROWS_WITH(HuggingFaceTokenizer::load(scheme), Catch::Contains("prepend_scheme \"sometimes\""));
  const std::string wordpiece_decoder = scratch_tokenizer(
      "hf-wordpiece-decoder", std::string(R"({"decoder": {"type": "WordPiece"}, )") + kTinyModel + "}");
  CHECK_THROWS_WITH(HuggingFaceTokenizer::load(wordpiece_decoder), Catch::Contains("the decoder \"WordPiece\""));
  const std::string removed = scratch_tokenizer(
      "hf-split-removed",
      std::string(R"({"pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "Removed", )"
                  R"("invert": false}, )") + kTinyModel + "}");
  CHECK_THROWS_WITH(HuggingFaceTokenizer::load(removed), Catch::Contains("behavior \"Removed\""));
  const std::string bad_merge = scratch_tokenizer(
      "hf-bad-merge", R"({"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, )"
                      R"("merges": ["a b"]}})");
  CHECK_THROWS_WITH(HuggingFaceTokenizer::load(bad_merge), Catch::Contains("makes \"ab\", which is not in the vocabulary"));
}

TEST_CASE("hf: a minimal tokenizer.json, its eos and its errors", "[hf][tokenizer]") {
  const std::string dir = scratch_tokenizer(
      "hf-minimal", std::string(R"({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}, )") +
                        kTinyModel + "}");
  auto tok = HuggingFaceTokenizer::load(dir);
  CHECK(tok->tokenize("abab") == std::vector<TokenId>{2, 2});
  CHECK(tok->tokenize("aab") == std::vector<TokenId>{0, 2});
  CHECK(tok->tokenize("c") == std::vector<TokenId>{});  // no unk_token: unknown bytes vanish
  CHECK(tok->vocab_size() == 3);
  CHECK(tok->eod() == 0);
  CHECK(tok->detokenize(std::vector<TokenId>{2, 0}) == "aba");
  CHECK_THROWS_WITH(tok->detokenize(std::vector<TokenId>{7}), Catch::Contains("token id 7"));

  // eos_token as an AddedToken object, from special_tokens_map.json over tokenizer_config.json.
  write_file(dir + "/special_tokens_map.json", R"({"eos_token": {"content": "ab", "lstrip": false}})");
  CHECK(HuggingFaceTokenizer::load(dir)->eod() == 2);

  std::filesystem::remove(dir + "/special_tokens_map.json");
  std::filesystem::remove(dir + "/tokenizer_config.json");
  CHECK_THROWS_WITH(HuggingFaceTokenizer::load(dir), Catch::Contains("no eos_token"));
  CHECK_THROWS_WITH(HuggingFaceTokenizer::load(test::scratch_dir("hf-empty")), Catch::Contains("has no tokenizer.json"));
}

TEST_CASE("hf: added tokens with lstrip, rstrip and single_word", "[hf][tokenizer]") {
  const std::string dir = scratch_tokenizer(
      "hf-added", std::string(R"({"added_tokens": [)"
                              R"({"id": 4, "content": "<x>", "special": true, "normalized": false, "lstrip": true, "rstrip": true, "single_word": false},)"
                              R"({"id": 5, "content": "bb", "special": false, "normalized": true, "lstrip": false, "rstrip": false, "single_word": true}],)"
                              R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}, )"
                              R"("model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3}, "merges": ["a b"]}})"));
  auto tok = HuggingFaceTokenizer::load(dir);
  CHECK(tok->tokenize("a  <x>  b") == std::vector<TokenId>{0, 4, 1});
  CHECK(tok->tokenize("a bb a") == std::vector<TokenId>{0, 3, 5, 3, 0});
  CHECK(tok->tokenize("abb") == std::vector<TokenId>{2, 1});  // "bb" is not a word here
  CHECK(tok->vocab_size() == 6);
}

TEST_CASE("hf: transformers' int(1e30) model_max_length in tokenizer_config.json is read", "[hf][tokenizer]") {
  // transformers writes it when a model sets no maximum; it does not fit in 64 bits.
  const std::string dir = scratch_tokenizer("hf-unbounded", std::string("{") + kTinyModel + "}");
  write_file(dir + "/tokenizer_config.json",
             R"({"eos_token": "a", "model_max_length": 1000000000000000019884624838656, "bos_token": "b"})");
  auto tok = HuggingFaceTokenizer::load(dir);
  CHECK(tok->eod() == 0);
  CHECK(tok->tokenize("ab") == std::vector<TokenId>{2});
}
