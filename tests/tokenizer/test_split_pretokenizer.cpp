#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "tokenizer/gpt2_bpe_tokenizer.hpp"
#include "tokenizer/split_pretokenizer.hpp"
#include "tokenizer/tiktoken_tokenizer.hpp"

using namespace mgt;

namespace {

using Pieces = std::vector<std::string>;

const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* kCl100k =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Pieces icu_pieces(const char* pattern, const std::string& text) {
  IcuSplitRegex regex(pattern, "test");
  IcuSplitRegex::Matcher matcher(regex);
  Pieces out;
  matcher.split(text, [&](std::size_t b, std::size_t e, bool matched) {
    CHECK(matched);  // these patterns match every character
    out.push_back(text.substr(b, e - b));
  });
  return out;
}

Pieces hand_pieces(const char* pattern, const std::string& text) {
  const auto known = recognize_split_pattern(pattern);
  REQUIRE(known.has_value());
  Pieces out;
  if (known->kind == KnownSplitPattern::Kind::kGpt2) {
    for (std::string_view p : Gpt2BpeTokenizer::pretokenize(text)) out.emplace_back(p);
  } else {
    for_each_llama_piece(text, known->llama, [&](std::string_view p) { out.emplace_back(p); });
  }
  return out;
}

// Random strings over characters that exercise every branch of the patterns: letters of several
// scripts, digits and other numbers, apostrophes and contraction letters (with the long s that
// case folding makes an s), line breaks, Unicode spaces, punctuation, emoji, combining marks.
std::string random_text(std::mt19937& rng) {
  static const std::vector<std::string> pool = {
      "a", "s", "T", "r", "e", "V", "l", "L", "d", "M", "'", "'", "\xC5\xBF", "x", "Z", "\xC3\xA9", "\xE4\xB8\xAD",
      "0", "7", "9", "\xD9\xA3", "\xC2\xB2", "\xE2\x85\xAB", " ", " ", " ", "\t", "\n", "\r", "\v", "\f",
      "\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\xA8", "\xC2\x85", ".", ",", "!", "?", "-", "/", "\"", "(", "_",
      "\xF0\x9F\x98\x80", "\xCC\x81", "\xE2\x80\x8D", "\xD7\xA9"};
  std::uniform_int_distribution<std::size_t> length(0, 24), pick(0, pool.size() - 1);
  std::string s;
  for (std::size_t n = length(rng); n > 0; --n) s += pool[pick(rng)];
  return s;
}

}  // namespace

TEST_CASE("split: the Llama 3 family and GPT-2 patterns are recognised", "[split][tokenizer]") {
  for (const char* p : {kLlama3, kQwen2, kCl100k}) {
    auto k = recognize_split_pattern(p);
    REQUIRE(k.has_value());
    CHECK(k->kind == KnownSplitPattern::Kind::kLlama);
    CHECK(k->llama.contractions);
  }
  CHECK(recognize_split_pattern(kLlama3)->llama.max_digits == 3);
  CHECK(recognize_split_pattern(kQwen2)->llama.max_digits == 1);
  auto v1 = recognize_split_pattern(kTikTokenPatternV1);
  REQUIRE(v1.has_value());
  CHECK_FALSE(v1->llama.contractions);
  CHECK(v1->llama.max_digits == 1);
  CHECK(recognize_split_pattern(kGpt2)->kind == KnownSplitPattern::Kind::kGpt2);
  CHECK_FALSE(recognize_split_pattern(kTikTokenPatternV2).has_value());
  CHECK_FALSE(recognize_split_pattern(R"(\p{L}+|\s+)").has_value());
}

TEST_CASE("split: hand-written matchers cut text exactly as the regex does", "[split][tokenizer]") {
  std::mt19937 rng(1234);
  for (const char* pattern : {kLlama3, kQwen2, kCl100k, kTikTokenPatternV1.data(), kGpt2}) {
    INFO(pattern);
    for (const char* text : {"", "Hello world", "it's DON'T 'ſ 'll", "x  \n\n  y", "  \n", "a1234567 b", " !!\n\nx",
                             "\t\tword", "end   "})
      CHECK(hand_pieces(pattern, text) == icu_pieces(pattern, text));
    for (int i = 0; i < 3000; ++i) {
      const std::string text = random_text(rng);
      INFO("text: " << text);
      REQUIRE(hand_pieces(pattern, text) == icu_pieces(pattern, text));
    }
  }
}

TEST_CASE("split: ICU regex reports gaps and refuses a bad pattern", "[split][tokenizer]") {
  IcuSplitRegex digits(R"(\d+)", "test");
  IcuSplitRegex::Matcher m(digits);
  std::vector<std::pair<std::string, bool>> parts;
  const std::string text = "ab12c\xF0\x9F\x98\x80" "3";
  m.split(text, [&](std::size_t b, std::size_t e, bool matched) { parts.emplace_back(text.substr(b, e - b), matched); });
  CHECK(parts == std::vector<std::pair<std::string, bool>>{
                     {"ab", false}, {"12", true}, {"c\xF0\x9F\x98\x80", false}, {"3", true}});
  CHECK_THROWS_WITH(IcuSplitRegex("(unclosed", "tokenizer.json 'x'"), Catch::Contains("tokenizer.json 'x'"));
}
