#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "golden_ids.hpp"
#include "test_paths.hpp"
#include "tokenizer/tiktoken_tokenizer.hpp"

using namespace mgt;

namespace {

TikTokenOptions options(const std::string& pattern, std::int64_t vocab_size, int num_special) {
  TikTokenOptions o;
  o.path = test::dataset_path("tokenizer-tests/tiktoken-bpe.json");
  o.pattern = pattern;
  o.vocab_size = vocab_size;
  o.num_special_tokens = num_special;
  return o;
}

}  // namespace

TEST_CASE("tiktoken: pattern v1 ids match Megatron's CustomTikTokenizer", "[tiktoken][tokenizer]") {
  test::check_golden("tiktoken-v1.jsonl");
}

TEST_CASE("tiktoken: pattern v2 with custom special tokens and a cut vocabulary matches Megatron",
          "[tiktoken][tokenizer]") {
  test::check_golden("tiktoken-v2.jsonl");
}

TEST_CASE("tiktoken: special ids, identifiers and Megatron's checks", "[tiktoken][tokenizer]") {
  auto tok = TikTokenizer::load(options("v1", 809, 10));
  CHECK(tok->class_name() == "CustomTikTokenizer");
  CHECK(tok->eod() == 2);
  CHECK(tok->bos() == 1);
  CHECK_FALSE(tok->pad().has_value());
  CHECK(tok->vocab_size() == 809);
  CHECK(tok->tokenize("a") == std::vector<TokenId>{10 + 'a'});
  CHECK(tok->detokenize(std::vector<TokenId>{2, 10 + 'a'}) == "</s>a");
  CHECK(tok->tokenizer_options() ==
        std::vector<std::pair<std::string, std::string>>{{"pattern", std::string(kTikTokenPatternV1)},
                                                         {"vocab_size", "809"},
                                                         {"num_special_tokens", "10"},
                                                         {"special_tokens", "None"}});
  TikTokenOptions custom = options("v2", 700, 12);
  custom.special_tokens = std::vector<std::string>{"<unk>", "<s>", "</s>", "it's"};
  CHECK(TikTokenizer::load(custom)->tokenizer_options().back().second == R"(['<unk>', '<s>', '</s>', "it's"])");

  // Megatron's assertions, as usage errors.
  CHECK_THROWS_WITH(TikTokenizer::load(options("v1", 5000, 10)), Catch::Contains("fewer than --vocab-size"));
  CHECK_THROWS_WITH(TikTokenizer::load(options("v1", 100, 100)), Catch::Contains("< --vocab-size"));
  TikTokenOptions missing = options("v1", 809, 10);
  missing.special_tokens = std::vector<std::string>{"<s>", "</s>"};
  CHECK_THROWS_WITH(TikTokenizer::load(missing), Catch::Contains("must include <unk>, <s> and </s>"));
  TikTokenOptions fallback = options("v1", 0, 10);
  fallback.vocab_size.reset();  // 2^17, more than the file has
  CHECK_THROWS_WITH(TikTokenizer::load(fallback), Catch::Contains("131072"));
}

TEST_CASE("tiktoken: a special-token table larger than memory is refused up front", "[tiktoken][tokenizer]") {
  const AvailableMemory gib{std::int64_t{1} << 30, "MemAvailable in a test"};
  CHECK_NOTHROW(check_tiktoken_special_token_memory(1000, gib));
  CHECK_NOTHROW(check_tiktoken_special_token_memory(2000000000, std::nullopt));  // unknown: not checked
  try {
    check_tiktoken_special_token_memory(2000000000, gib);
    FAIL("no usage error");
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitUsage);
    CHECK_THAT(e.what(), Catch::StartsWith("--tiktoken-num-special-tokens 2000000000 needs about "));
    CHECK_THAT(e.what(), Catch::Contains("GiB of memory") && Catch::Contains("only 1.0 GiB is available (MemAvailable in a test)"));
  }
}

TEST_CASE("tiktoken: tiktoken's own BASE64 RANK file gives the same ids", "[tiktoken][tokenizer]") {
  // The ranks of tiktoken-bpe.json, rewritten as a .tiktoken file.
  const std::string path = test::scratch_dir("tiktoken-plain") + "/ranks.tiktoken";
  {
    simdjson::dom::parser parser;
    std::ofstream out(path);
    for (simdjson::dom::element e : parser.load(test::dataset_path("tokenizer-tests/tiktoken-bpe.json")).get_array())
      out << std::string_view(e["token_bytes"].get_string()) << ' ' << std::int64_t(e["rank"]) << '\n';
  }
  auto json = TikTokenizer::load(options("v1", 809, 10));
  TikTokenOptions plain = options("v1", 809, 10);
  plain.path = path;
  auto tok = TikTokenizer::load(plain);
  for (const char* text : {"Hello world, it's 2024!", "  spaces\n\nand lines", "中文 emoji 😀"})
    CHECK(tok->tokenize(text) == json->tokenize(text));
}

TEST_CASE("tiktoken: a rank that repeats another's bytes is refused, naming both", "[tiktoken][tokenizer]") {
  // tiktoken-bpe.json as a .tiktoken file, with rank 700 given the bytes of rank 300.
  const std::string path = test::scratch_dir("tiktoken-repeat") + "/ranks.tiktoken";
  {
    simdjson::dom::parser parser;
    std::vector<std::string_view> bytes;
    for (simdjson::dom::element e : parser.load(test::dataset_path("tokenizer-tests/tiktoken-bpe.json")).get_array())
      bytes.push_back(e["token_bytes"].get_string());
    REQUIRE(bytes.size() > 700);
    bytes[700] = bytes[300];
    std::ofstream out(path);
    for (std::size_t r = 0; r < bytes.size(); ++r) out << bytes[r] << ' ' << r << '\n';
  }
  TikTokenOptions repeat = options("v1", 809, 10);
  repeat.path = path;
  CHECK_THROWS_WITH(TikTokenizer::load(repeat), Catch::Contains("rank 700 repeats the bytes of rank 300"));
}
