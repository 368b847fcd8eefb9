#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/utf8.hpp"
#include "test_paths.hpp"
#include "tokenizer/split_pretokenizer.hpp"
#include "tokenizer/tiktoken_tokenizer.hpp"
#include "tokenizer/tiktoken_v2_pretokenizer.hpp"

using namespace mgt;

// The hand-written matcher of TikToken pattern v2 against ICU's regex engine, which it replaces
// and which stays the reference: the same pieces for every input.

namespace {

using Pieces = std::vector<std::string>;

class Icu {
public:
  Icu() : regex_(kTikTokenPatternV2, "test"), matcher_(regex_) {}
  Pieces pieces(const std::string& text) {
    Pieces out;
    matcher_.split(text, [&](std::size_t b, std::size_t e, bool matched) {
      CHECK(matched);  // the pattern matches every character
      out.push_back(text.substr(b, e - b));
    });
    return out;
  }

private:
  IcuSplitRegex regex_;
  IcuSplitRegex::Matcher matcher_;
};

Pieces hand_pieces(const std::string& text) {
  Pieces out;
  tiktoken_v2::for_each_piece(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The first difference, for a readable failure on long texts.
std::string first_difference(const Pieces& a, const Pieces& b) {
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  std::ostringstream s;
  s << "piece " << i << ": hand '" << (i < a.size() ? a[i] : "<end>") << "' vs ICU '"
    << (i < b.size() ? b[i] : "<end>") << "'";
  return s.str();
}

// Characters for every branch of the pattern and every way its letter classes overlap:
// Lu, Lt, Ll, Lm, Lo, marks of the three kinds (Mn, Mc, Me), numbers of the three kinds,
// apostrophe contractions in both cases, Unicode spaces and line breaks, '/', symbols, emoji,
// a zero-width joiner, and bytes that are not UTF-8 (a stray continuation, a truncated sequence,
// an encoded surrogate, an overlong form, a byte that never starts UTF-8).
const std::vector<std::string> kPool = {
    "a", "b", "s", "l", "A", "B", "S", "L", "T", "Ve", "RE", "'", "'", "x", "Z",
    "\xC3\xA9",          // é Ll
    "\xC3\x89",          // É Lu
    "\xC7\x85",          // ǅ Lt
    "\xC3\x9F",          // ß Ll
    "\xCA\xB0",          // ʰ Lm
    "\xE3\x80\x85",      // 々 Lm
    "\xE4\xB8\xAD",      // 中 Lo
    "\xD7\xA9",          // ש Lo
    "\xCC\x81",          // combining acute, Mn
    "\xCC\x81",
    "\xE0\xA4\x83",      // Devanagari visarga, Mc
    "\xE2\x83\x9D",      // combining enclosing circle, Me
    "\xE0\xA4\x95",      // क Lo
    "0", "7", "9", "12345",
    "\xD9\xA3",          // Arabic-Indic 3, Nd
    "\xC2\xB2",          // ², No
    "\xE2\x85\xAB",      // Ⅻ, Nl
    " ", " ", " ", "  ", "\t", "\n", "\r", "\r\n", "\v", "\f",
    "\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\xA8", "\xC2\x85",
    ".", ",", "!", "?", "-", "/", "//", "\"", "(", "_", "$",
    "\xF0\x9F\x98\x80",  // emoji
    "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",  // emoji with a skin tone modifier
    "\xE2\x80\x8D",      // zero-width joiner, Cf
    "\xEF\xBF\xBD",      // U+FFFD itself
    std::string(1, '\0'),
    "\x80", "\xE2\x82", "\xED\xA0\x80", "\xC0\xAF", "\xFF",
};

std::string random_text(std::mt19937& rng, std::size_t max_length) {
  std::uniform_int_distribution<std::size_t> length(0, max_length), pick(0, kPool.size() - 1);
  std::string s;
  for (std::size_t n = length(rng); n > 0; --n) s += kPool[pick(rng)];
  return s;
}

}  // namespace

TEST_CASE("tiktoken v2 split: chosen texts cut exactly as ICU's regex cuts them", "[tiktoken][split][tokenizer]") {
  Icu icu;
  const std::vector<std::string> texts = {
      "",
      "Hello world",
      "HELLO World hELLO wOrLd",
      "McDonald's IPhone iPhone ABCdef abcDEF",
      "it's DON'T 'S 'LL 'll 'Ve 're",
      "a1234567 b 3.14159 \xD9\xA3\xD9\xA4\xD9\xA5\xD9\xA6",
      "x  \n\n  y",
      "  \n",
      " \r\n\r\n  \tz",
      "end   ",
      "\t\tword",
      " !!\n\nx",
      " ... /// a/b/c\n/ x",
      "path/to/file\r\n//comment",
      "e\xCC\x81t\xC3\xA9 E\xCC\x81T\xC3\x89",
      "\xCC\x81\xCC\x81" "abc",
      "\xCC\x81" "ABC",
      "A\xCC\x81" "B\xCC\x81" "C",
      "AB\xCA\xB0" "CD",
      "AB\xE4\xB8\xAD" "CD",
      "\xC7\x85" "a \xC7\x85" "A \xC7\x85\xC7\x85",
      "!\xCC\x81" "A",
      "!" "\xE2\x83\x9D" "\xE2\x83\x9D" "x",
      " \xCC\x81",
      "\xE0\xA4\x95\xE0\xA4\xBE\xE0\xA4\x83\xE0\xA4\xB0 \xE0\xA4\x95\xE0\xA4\xBF",
      "\xE4\xB8\xAD\xE6\x96\x87 \xE4\xB8\xAD\xE6\x96\x87" "ABC",
      "\xF0\x9F\x98\x80\xF0\x9F\x98\x80 hi \xF0\x9F\x98\x80" "A",
      "\xC2\xA0" "A \xE3\x80\x80" "b \xC2\x85" "c",
      "\x80" "abc \xFF" "ABC \xE2\x82" "x \xED\xA0\x80" "y",
  };
  for (const std::string& text : texts) {
    INFO("text: " << text);
    CHECK(hand_pieces(text) == icu.pieces(text));
  }
}

TEST_CASE("tiktoken v2 split: random texts cut exactly as ICU's regex cuts them", "[tiktoken][split][tokenizer]") {
  Icu icu;
  std::mt19937 rng(2024);
  for (int i = 0; i < 20000; ++i) {
    const std::string text = random_text(rng, i < 10000 ? 8 : 40);
    const Pieces hand = hand_pieces(text), reference = icu.pieces(text);
    INFO("text: " << text);
    INFO(first_difference(hand, reference));
    REQUIRE(hand == reference);
  }
}

// Mostly ASCII, for the matcher's shortcuts: long lowercase runs (read eight bytes at a time)
// ending in each byte next to 'a'..'z' and 'A'..'Z', at a non-ASCII letter, a mark or a byte
// that is not UTF-8 (whose high bit and carries the eight-byte test must handle), and at the
// text's end; capitals after every kind of prefix.
const std::vector<std::string> kAsciiPool = {
    "abcdefgh", "wordsandwords", "z", "a", "q", "A", "Z", "THE", "The", "`", "{", "@", "[", "~",
    "\x7F", " ", " ", "\n", "\t", ".", ",", "(", "'", "0", "/",
    "\xC3\xA9", "\xC3\x89", "\xCC\x81", "\xE4\xB8\xAD", "\xE2\x80\x8D", "\xFF", "\xE1", "\x80",
    "\xFB", "\xC2\xA0",
};

TEST_CASE("tiktoken v2 split: random mostly-ASCII texts cut exactly as ICU's regex cuts them",
          "[tiktoken][split][tokenizer]") {
  Icu icu;
  std::mt19937 rng(2026);
  std::uniform_int_distribution<std::size_t> length(0, 24), pick(0, kAsciiPool.size() - 1);
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    for (std::size_t n = length(rng); n > 0; --n) text += kAsciiPool[pick(rng)];
    const Pieces hand = hand_pieces(text), reference = icu.pieces(text);
    INFO("text: " << text);
    INFO(first_difference(hand, reference));
    REQUIRE(hand == reference);
  }
}

TEST_CASE("tiktoken v2 split: the class table agrees with ICU's regex classes on every code point",
          "[tiktoken][split][tokenizer]") {
  std::string all;
  std::vector<char32_t> code_points;
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    utf8::append(all, cp);
    code_points.push_back(cp);
  }
  const tiktoken_v2::Classes& classes = tiktoken_v2::Classes::instance();
  const std::vector<std::pair<std::uint8_t, const char*>> sets = {
      {tiktoken_v2::kUpperSet, R"([\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])"},
      {tiktoken_v2::kLowerSet, R"([\p{Ll}\p{Lm}\p{Lo}\p{M}])"},
      {tiktoken_v2::kPrefix, R"([^\r\n\p{L}\p{N}])"},
      {tiktoken_v2::kSymbol, R"([^\s\p{L}\p{N}])"},
      {tiktoken_v2::kSpace, R"(\s)"},
      {tiktoken_v2::kNumber, R"(\p{N})"}};
  for (const auto& [bit, pattern] : sets) {
    INFO(pattern);
    IcuSplitRegex regex(pattern, "test");
    IcuSplitRegex::Matcher matcher(regex);
    std::size_t index = 0, mismatches = 0;
    char32_t first_mismatch = 0;
    matcher.split(all, [&](std::size_t b, std::size_t e, bool matched) {
      for (std::size_t pos = b; pos < e; ++index) {
        utf8::decode_next(all, pos);
        const bool member = (classes.of(code_points[index]) & bit) != 0;
        if (member != matched && mismatches++ == 0) first_mismatch = code_points[index];
      }
    });
    CHECK(index == code_points.size());
    INFO("first mismatch U+" << std::hex << static_cast<std::uint32_t>(first_mismatch));
    CHECK(mismatches == 0);
  }
}

TEST_CASE("tiktoken v2 split: every BMP code point between letters, spaces and symbols cuts as ICU's regex",
          "[tiktoken][split][tokenizer]") {
  Icu icu;
  const std::vector<std::pair<std::string, std::string>> contexts = {
      {"a", "b"}, {"A", "b"}, {" ", "A"}, {"!", "a"}, {"\xCC\x81", "A"}, {"\n", "/"}};
  std::string text;
  for (char32_t cp = 0; cp < 0x10000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string c;
    utf8::append(c, cp);
    for (const auto& [before, after] : contexts) text += before + c + c + after + " ";
  }
  const Pieces hand = hand_pieces(text), reference = icu.pieces(text);
  INFO(first_difference(hand, reference));
  REQUIRE(hand == reference);
}

TEST_CASE("tiktoken v2 split: the bundled corpora cut exactly as ICU's regex cuts them", "[tiktoken][split][tokenizer]") {
  Icu icu;
  for (const char* name : {"corpus-gutenberg.jsonl", "corpus-tinyshakespeare.jsonl", "lambada_test.jsonl",
                           "tinyshakespeare.txt", "wikitext-103.wiki.test.tokens", "wikitext-103.wiki.valid.tokens",
                           "wikitext-2.wiki.test.tokens", "tokenizer-tests/ggml-vocab-gpt-2.inp",
                           "tokenizer-tests/ggml-vocab-bert-bge.inp"}) {
    const std::string text = read_file(test::dataset_path(name));
    const Pieces hand = hand_pieces(text), reference = icu.pieces(text);
    INFO(name << ": " << first_difference(hand, reference));
    REQUIRE(hand == reference);
  }
}
