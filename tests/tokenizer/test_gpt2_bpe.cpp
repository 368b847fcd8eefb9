#include <catch2/catch.hpp>
#include <simdjson.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "test_paths.hpp"
#include "tokenizer/gpt2_bpe_tokenizer.hpp"
#include "tokenizer/unicode_class.hpp"

using namespace mgt;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

// One shared instance: loading takes a few tens of milliseconds.
Gpt2BpeTokenizer& gpt2() {
  static std::unique_ptr<Gpt2BpeTokenizer> tok =
      Gpt2BpeTokenizer::load(test::dataset_path("gpt2-vocab.json"), test::dataset_path("gpt2-merges.txt"));
  return *tok;
}

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view p : Gpt2BpeTokenizer::pretokenize(text)) out.emplace_back(p);
  return out;
}

using Ids = std::vector<TokenId>;

// Texts of a bundled file: the "text" fields of a JSONL file, or the whole file.
std::vector<std::string> bundled_texts(const std::string& name) {
  std::string content = read_file(test::dataset_path(name));
  if (!name.ends_with(".jsonl")) return {content};
  std::vector<std::string> texts;
  simdjson::dom::parser parser;
  std::istringstream lines(content);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    std::string_view text;
    REQUIRE(parser.parse(line)["text"].get(text) == simdjson::SUCCESS);
    texts.emplace_back(text);
  }
  return texts;
}

bool throws_naming(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
  } catch (const Error& e) {
    INFO(e.what());
    return std::string(e.what()).find(needle) != std::string::npos;
  }
  return false;
}

}  // namespace

TEST_CASE("gpt2: metadata matches Megatron's _GPT2BPETokenizer", "[gpt2][tokenizer]") {
  Gpt2BpeTokenizer& tok = gpt2();
  CHECK(tok.class_name() == "_GPT2BPETokenizer");
  CHECK(tok.vocab_size() == 50257);
  CHECK(tok.eod() == 50256);
  CHECK_FALSE(tok.pad().has_value());
  CHECK(tok.tokenizer_paths() ==
        std::vector<std::string>{test::dataset_path("gpt2-vocab.json"), test::dataset_path("gpt2-merges.txt")});
}

TEST_CASE("gpt2: llama.cpp's 46 GPT-2 test vectors", "[gpt2][tokenizer]") {
  // Inputs are each followed by "\n__ggml_vocab_test__\n"; outputs are one line per input.
  const std::string inp = read_file(test::dataset_path("tokenizer-tests/ggml-vocab-gpt-2.inp"));
  const std::string out = read_file(test::dataset_path("tokenizer-tests/ggml-vocab-gpt-2.out"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (std::size_t pos = 0; pos < inp.size();) {
    std::size_t end = inp.find(sep, pos);
    REQUIRE(end != std::string::npos);
    inputs.push_back(inp.substr(pos, end - pos));
    pos = end + sep.size();
  }
  std::vector<Ids> expected;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream ids(line);
    Ids row;
    for (TokenId id; ids >> id;) row.push_back(id);
    expected.push_back(row);
  }
  REQUIRE(inputs.size() == 46);
  REQUIRE(expected.size() == 46);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    INFO("vector " << i << ": [" << inputs[i] << "]");
    CHECK(gpt2().tokenize(inputs[i]) == expected[i]);
    CHECK(gpt2().detokenize(expected[i]) == inputs[i]);
  }
}

TEST_CASE("gpt2: a literal <|endoftext|> is ordinary text", "[gpt2][tokenizer]") {
  CHECK(gpt2().tokenize("<|endoftext|>") == Ids{27, 91, 437, 1659, 5239, 91, 29});
  CHECK(gpt2().detokenize(Ids{50256}) == "<|endoftext|>");
}

TEST_CASE("gpt2: contractions are case-sensitive", "[gpt2][tokenizer]") {
  CHECK(pieces("DON'T") == std::vector<std::string>{"DON", "'", "T"});
  CHECK(gpt2().tokenize("DON'T") == Ids{41173, 6, 51});
  CHECK(pieces("don't") == std::vector<std::string>{"don", "'t"});
  CHECK(gpt2().tokenize("don't") == Ids{9099, 470});
  CHECK(pieces("we'll 've") == std::vector<std::string>{"we", "'ll", " '", "ve"});
  CHECK(pieces("'''s") == std::vector<std::string>{"'''", "s"});
  CHECK(pieces("I'M") == std::vector<std::string>{"I", "'", "M"});
}

TEST_CASE("gpt2: a run of whitespace leaves its last space to the next word, as the regex backtracks", "[gpt2][tokenizer]") {
  CHECK(pieces("  Hello\n\n  world  ") ==
        std::vector<std::string>{" ", " Hello", "\n\n ", " world", "  "});
  CHECK(gpt2().tokenize("  Hello\n\n  world  ") == Ids{220, 18435, 628, 220, 995, 220, 220});
  CHECK(pieces("x \t\ny") == std::vector<std::string>{"x", " \t", "\n", "y"});
  // U+00A0 and U+3000 are \s but only U+0020 may prefix a word.
  CHECK(pieces("a\u00a0\u00a0b") == std::vector<std::string>{"a", "\u00a0", "\u00a0", "b"});
  CHECK(pieces("\u3000\u3000a") == std::vector<std::string>{"\u3000", "\u3000", "a"});
  CHECK(pieces("\r\n\r\n") == std::vector<std::string>{"\r\n\r\n"});
  CHECK(pieces("end   ") == std::vector<std::string>{"end", "   "});
  CHECK(pieces(" ") == std::vector<std::string>{" "});
  CHECK(pieces("").empty());
  // U+001C..U+001F are not \s for `regex` (they are for str.isspace()).
  CHECK(pieces("a\x1c b") == std::vector<std::string>{"a", "\x1c", " b"});
}

TEST_CASE("gpt2: letters, numbers and marks by Unicode category", "[gpt2][tokenizer]") {
  CHECK(pieces("3.14 +42 \u00be\u216b\u0663") ==
        std::vector<std::string>{"3", ".", "14", " +", "42", " \u00be\u216b\u0663"});
  // A combining mark (Mn) is neither a letter nor a number.
  CHECK(pieces("e\u0301t\u00e9") == std::vector<std::string>{"e", "\u0301", "t\u00e9"});
  CHECK(gpt2().tokenize("e\u0301t\u00e9") == Ids{68, 136, 223, 83, 2634});
}

TEST_CASE("gpt2: code point classes agree with Python's regex", "[gpt2][tokenizer]") {
  using unicode::PretokenClass;
  const auto& classes = unicode::PretokenClasses::instance();
  for (char32_t cp : {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x200A, 0x2028,
                      0x2029, 0x202F, 0x205F, 0x3000})
    CHECK(classes.of(cp) == PretokenClass::kSpace);
  for (char32_t cp : {0x1C, 0x1F, 0x200B, 0x180E, 0xFEFF, 0x0301, 0x2E, 0xE000, 0x10FFFF, 0x110000})
    CHECK(classes.of(cp) == PretokenClass::kOther);
  // U+1C89 and U+3D000 are letters from Unicode 16 and 17, later than ICU 72's Unicode 15.
  for (char32_t cp : {0x41, 0x01C5, 0x02B0, 0x05D0, 0x4E00, 0x1C89, 0x3D000, 0x20000})
    CHECK(classes.of(cp) == PretokenClass::kLetter);
  for (char32_t cp : {0x30, 0xB2, 0xBE, 0x0663, 0x216B, 0x10D40, 0x1F100})
    CHECK(classes.of(cp) == PretokenClass::kNumber);
}

TEST_CASE("gpt2: ids match the Python reference on the golden set", "[gpt2][tokenizer]") {
  // tests/tokenizer/golden/gpt2_golden.jsonl: see its first line for the command that makes it.
  std::string content = read_file(std::string(MGT_SOURCE_DIR) + "/tests/tokenizer/golden/gpt2_golden.jsonl");
  simdjson::dom::parser parser;
  std::istringstream lines(content);
  std::size_t texts = 0;
  std::size_t tokens = 0;
  for (std::string line; std::getline(lines, line);) {
    simdjson::dom::element doc = parser.parse(line);
    std::string_view text;
    simdjson::dom::array ids;
    if (doc["text"].get(text) != simdjson::SUCCESS) continue;  // the comment line
    REQUIRE(doc["ids"].get(ids) == simdjson::SUCCESS);
    Ids expected;
    for (simdjson::dom::element id : ids) expected.push_back(static_cast<TokenId>(std::int64_t(id)));
    INFO("golden text " << texts);
    CHECK(gpt2().tokenize(text) == expected);
    CHECK(gpt2().detokenize(expected) == text);
    ++texts;
    tokens += expected.size();
  }
  CHECK(texts >= 60);
  CHECK(tokens >= 5000);
}

TEST_CASE("gpt2: decode(encode(x)) == x on every bundled text", "[gpt2][tokenizer]") {
  std::unique_ptr<Tokenizer> tok = gpt2().clone();
  for (const char* name : {"corpus-gutenberg.jsonl", "corpus-tinyshakespeare.jsonl", "lambada_test.jsonl",
                           "tinyshakespeare.txt", "wikitext-103.wiki.test.tokens",
                           "wikitext-103.wiki.valid.tokens", "wikitext-2.wiki.test.tokens"}) {
    std::size_t failures = 0;
    for (const std::string& text : bundled_texts(name))
      if (tok->detokenize(tok->tokenize(text)) != text) ++failures;
    INFO(name);
    CHECK(failures == 0);
  }
}

TEST_CASE("gpt2: clones share tables and give the same ids", "[gpt2][tokenizer]") {
  std::unique_ptr<Tokenizer> a = gpt2().clone();
  std::unique_ptr<Tokenizer> b = a->clone();
  const std::string text = "The quick brown fox jumps over the lazy dog. \u65e5\u672c\u8a9e!";
  Ids first = a->tokenize(text);
  CHECK(a->tokenize(text) == first);  // cached
  CHECK(b->tokenize(text) == first);  // cold cache
  CHECK(b->vocab_size() == 50257);
  CHECK(b->class_name() == "_GPT2BPETokenizer");
  Ids appended{7};
  b->tokenize(text, appended);
  CHECK(appended.size() == first.size() + 1);
}

TEST_CASE("gpt2: invalid UTF-8 is tokenized byte by byte and decoded with U+FFFD", "[gpt2][tokenizer]") {
  // Python's bytes.decode('utf-8', errors='replace'): one U+FFFD per maximal invalid subpart.
  const std::string fffd = "\xEF\xBF\xBD";
  struct Case {
    std::string in, out;
  };
  for (const Case& c : std::vector<Case>{
           {"\xF0\x80\x80", fffd + fffd + fffd},
           {"\xE2\x82" "A", fffd + "A"},
           {"\xED\xA0\x80", fffd + fffd + fffd},
           {"\xF4\x90\x80\x80", fffd + fffd + fffd + fffd},
           {"\xC0\xAF", fffd + fffd},
           {"ab \xF0\x9F\x98", "ab " + fffd},
           {"\xF0\x9F\x98\x80\x80", "\xF0\x9F\x98\x80" + fffd},
           {"x\xFFy", "x" + fffd + "y"}}) {
    Ids ids = gpt2().tokenize(c.in);
    CHECK(gpt2().detokenize(ids) == c.out);
  }
  CHECK(pieces("a\xFF\xFE b") == std::vector<std::string>{"a", "\xFF\xFE", " b"});
}

TEST_CASE("gpt2: decoding an id outside the vocabulary throws", "[gpt2][tokenizer]") {
  CHECK_THROWS_AS(gpt2().detokenize(Ids{50257}), Error);
  CHECK_THROWS_AS(gpt2().detokenize(Ids{-1}), Error);
  CHECK(gpt2().detokenize(Ids{}).empty());
}

TEST_CASE("gpt2: vocab and merges file errors name the file", "[gpt2][tokenizer]") {
  const std::string dir = test::scratch_dir("gpt2_bpe_errors");
  const std::string vocab = test::dataset_path("gpt2-vocab.json");
  const std::string merges = test::dataset_path("gpt2-merges.txt");
  const std::string missing = dir + "/missing.json";
  CHECK(throws_naming([&] { Gpt2BpeTokenizer::load(missing, merges); }, missing));
  CHECK(throws_naming([&] { Gpt2BpeTokenizer::load(vocab, dir + "/missing.txt"); }, dir + "/missing.txt"));

  const std::string truncated = dir + "/truncated.json";
  write_file(truncated, "{\"a\": 0, \"b\": ");
  CHECK(throws_naming([&] { Gpt2BpeTokenizer::load(truncated, merges); }, truncated));
  const std::string not_object = dir + "/list.json";
  write_file(not_object, "[1, 2]");
  CHECK(throws_naming([&] { Gpt2BpeTokenizer::load(not_object, merges); }, not_object));
  const std::string string_id = dir + "/string_id.json";
  write_file(string_id, "{\"a\": \"0\", \"<|endoftext|>\": 1}");
  CHECK(throws_naming([&] { Gpt2BpeTokenizer::load(string_id, merges); }, string_id));
  const std::string trailing = dir + "/trailing.json";
  write_file(trailing, "{\"a\": 0, \"<|endoftext|>\": 1} x");
  CHECK(throws_naming([&] { Gpt2BpeTokenizer::load(trailing, merges); }, trailing));
  const std::string no_eod = dir + "/no_eod.json";
  write_file(no_eod, "{\"a\": 0}");
  CHECK(throws_naming([&] { Gpt2BpeTokenizer::load(no_eod, merges); }, no_eod));
  const std::string bad_utf8 = dir + "/bad_utf8.txt";
  write_file(bad_utf8, "#version: 0.2\nh e\xFF\n");
  CHECK(throws_naming([&] { Gpt2BpeTokenizer::load(vocab, bad_utf8); }, bad_utf8));
}

TEST_CASE("gpt2: merges file is read as Python splits it on newlines, the first and last pieces dropped", "[gpt2][tokenizer]") {
  const std::string dir = test::scratch_dir("gpt2_bpe_merges");
  const std::string vocab = test::dataset_path("gpt2-vocab.json");
  auto ids_with = [&](const std::string& name, const std::string& merges) {
    write_file(dir + "/" + name, merges);
    return Gpt2BpeTokenizer::load(vocab, dir + "/" + name)->tokenize("he the");
  };
  // "h e" is GPT-2's merge 2 (id 258 = "he"); "Ġ t" is merge 0 (id 256 = "Ġt").
  CHECK(ids_with("lf.txt", "#version: 0.2\n\xC4\xA0 t\nh e\n") == Ids{258, 256, 258});
  // Without a final newline the last merge is lost, exactly as in Megatron.
  CHECK(ids_with("no_newline.txt", "#version: 0.2\n\xC4\xA0 t\nh e") == Ids{71, 68, 256, 71, 68});
  // Python's universal newlines make CRLF files equivalent.
  CHECK(ids_with("crlf.txt", "#version: 0.2\r\n\xC4\xA0 t\r\nh e\r\n") == Ids{258, 256, 258});
  // The first line is always skipped, whatever it holds.
  CHECK(ids_with("no_header.txt", "h e\n\xC4\xA0 t\n") == Ids{71, 68, 256, 71, 68});
  CHECK(ids_with("empty.txt", "") == Ids{71, 68, 220, 83, 71, 68});
}

TEST_CASE("gpt2: each round merges every occurrence before choosing again", "[gpt2][tokenizer]") {
  // With "ab a" ranked before "a b", merging "a b" creates "ab a" pairs of a lower rank. Megatron
  // still finishes the "a b" pass first; both the short-piece and the long-piece (> 48 bytes)
  // paths must agree. Expected ids from tools/reference/gpt2_tokenize_reference.py's algorithm.
  const std::string dir = test::scratch_dir("gpt2_bpe_rounds");
  write_file(dir + "/merges.txt", "#version: 0.2\nab a\na b\n");
  auto tok = Gpt2BpeTokenizer::load(test::dataset_path("gpt2-vocab.json"), dir + "/merges.txt");
  const TokenId a = 64, ab = 397, aba = 15498;
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  CHECK(tok->tokenize(repeat("ab", 3)) == Ids(3, ab));
  CHECK(tok->tokenize(repeat("ab", 30)) == Ids(30, ab));
  CHECK(tok->tokenize(repeat("aab", 2)) == Ids{a, aba, ab});
  Ids long_expected{a};
  long_expected.insert(long_expected.end(), 19, aba);
  long_expected.push_back(ab);
  CHECK(tok->tokenize(repeat("aab", 20)) == long_expected);
}
