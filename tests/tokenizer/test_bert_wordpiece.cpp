#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "tokenizer/bert_wordpiece_tokenizer.hpp"
#include "test_paths.hpp"

using namespace mgt;
using Ids = std::vector<TokenId>;
using Strings = std::vector<std::string>;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

BertWordPieceTokenizer& uncased() {
  static auto tokenizer = BertWordPieceTokenizer::load(test::dataset_path("bert-uncased-vocab.txt"), true);
  return *tokenizer;
}

BertWordPieceTokenizer& cased() {
  static auto tokenizer = BertWordPieceTokenizer::load(test::dataset_path("bert-cased-vocab.txt"), false);
  return *tokenizer;
}

std::string write_vocab(const std::string& name, const std::string& content) {
  std::string path = test::scratch_dir("bert-" + name) + "/vocab.txt";
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

}  // namespace

// llama.cpp's tokenizer test vectors for the BGE (bert-base-uncased) vocabulary: inputs end with
// "\n__ggml_vocab_test__\n", outputs are one line of ids per input.
TEST_CASE("bert uncased matches the 46 ggml-vocab-bert-bge vectors", "[bert]") {
  std::string inp = slurp(test::dataset_path("tokenizer-tests/ggml-vocab-bert-bge.inp"));
  std::string out = slurp(test::dataset_path("tokenizer-tests/ggml-vocab-bert-bge.out"));
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (std::size_t pos = 0, hit; (hit = inp.find(separator, pos)) != std::string::npos;
       pos = hit + separator.size()) {
    inputs.push_back(inp.substr(pos, hit - pos));
  }
  std::vector<Ids> expected;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    Ids ids;
    std::istringstream words(line);
    for (long id; words >> id;) ids.push_back(static_cast<TokenId>(id));
    expected.push_back(ids);
  }
  REQUIRE(inputs.size() == 46);
  REQUIRE(expected.size() == 46);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    INFO("vector " << i << ": '" << inputs[i] << "'");
    CHECK(uncased().tokenize(inputs[i]) == expected[i]);
  }
}

TEST_CASE("bert vocab facts follow Megatron's _BertWordPieceTokenizer", "[bert]") {
  BertWordPieceTokenizer& t = uncased();
  CHECK(t.vocab_size() == 30524);
  CHECK(t.bos() == 30522);
  CHECK(t.eos() == 30523);
  CHECK(t.eod() == 30523);
  CHECK(t.pad() == 0);
  CHECK(t.cls() == 101);
  CHECK(t.sep() == 102);
  CHECK(t.mask() == 103);
  CHECK(t.token_to_id("[UNK]") == 100);
  CHECK(t.class_name() == "_BertWordPieceTokenizer");
  CHECK(t.tokenizer_paths() == Strings{test::dataset_path("bert-uncased-vocab.txt")});
  using Options = std::vector<std::pair<std::string, std::string>>;
  CHECK(t.tokenizer_options() == Options{{"lower_case", "True"}, {"vocab_extra_ids", "0"}});
  CHECK(cased().vocab_size() == 28998);
  CHECK(cased().eod() == 28997);
  CHECK(cased().tokenizer_options() == Options{{"lower_case", "False"}, {"vocab_extra_ids", "0"}});

  auto extra = BertWordPieceTokenizer::load(test::dataset_path("bert-uncased-vocab.txt"), true, 3);
  CHECK(extra->vocab_size() == 30527);
  CHECK(extra->token_to_id("<extra_id_0>") == 30524);
  CHECK(extra->token_to_id("<extra_id_2>") == 30526);
  CHECK(extra->tokenizer_options()[1].second == "3");
  // Added tokens are never produced from text: '<' and '[' are punctuation.
  CHECK(extra->tokenize("<extra_id_0> [EOS]") ==
        Ids{1026, 4469, 1035, 8909, 1035, 1014, 1028, 1031, 1041, 2891, 1033});
}

// Expected ids below come from tools/reference/bert_tokenize_reference.py (Python's own
// str.lower, unicodedata and str.split running Megatron's algorithm).
TEST_CASE("bert lower-case strips accents, cased keeps them", "[bert]") {
  CHECK(uncased().tokenize_to_strings("Héllo Wörld! Café") == Strings{"hello", "world", "!", "cafe"});
  CHECK(cased().tokenize_to_strings("Héllo Wörld! Café") ==
        Strings{"H", "##é", "##llo", "W", "##ö", "##rl", "##d", "!", "Café"});
  CHECK(uncased().tokenize("João's naïve résumé") == Ids{16304, 1005, 1055, 15743, 13746});
  CHECK(cased().tokenize("João's naïve résumé") ==
        Ids{18139, 112, 188, 9468, 28203, 2707, 187, 10051, 1818, 2744});
  // A decomposed accent: dropped after NFD when lower-casing, a piece of its own otherwise.
  CHECK(uncased().tokenize("a\xcc\x81") == Ids{1037});
  CHECK(cased().tokenize("a\xcc\x81") == Ids{170, 28310});
}

TEST_CASE("bert lower-casing is Python's full Unicode lower()", "[bert]") {
  // 'İ' lower-cases to "i̇" and loses the dot; Σ is final (ς) only at the end of the
  // whitespace word, even when punctuation follows inside that word.
  CHECK(uncased().tokenize_to_strings("İstanbul ΑΣ.Β ΑΣ") ==
        Strings{"istanbul", "α", "##σ", ".", "β", "α", "##ς"});
  CHECK(cased().tokenize("İstanbul ΑΣ.Β ΑΣ") ==
        Ids{300, 13946, 27515, 394, 28329, 119, 395, 394, 28329});
  CHECK(uncased().tokenize_to_strings("Straße STRASSE") ==
        Strings{"st", "##raße", "st", "##ras", "##se"});
  // U+1FEF decomposes to '`', which is punctuation only after NFD.
  CHECK(uncased().tokenize_to_strings("x\xe1\xbf\xafy") == Strings{"x", "`", "y"});
  CHECK(cased().tokenize_to_strings("x\xe1\xbf\xafy") == Strings{"[UNK]"});
}

TEST_CASE("bert spaces out CJK ideographs", "[bert]") {
  CHECK(uncased().tokenize_to_strings("你好世界abc") ==
        Strings{"[UNK]", "[UNK]", "世", "[UNK]", "abc"});
  CHECK(cased().tokenize("你好世界abc") == Ids{100, 100, 100, 100, 170, 1830, 1665});
  // Hiragana is not in the CJK blocks, so it stays inside its word.
  CHECK(uncased().tokenize_to_strings("aの") == Strings{"a", "##の"});
}

TEST_CASE("bert drops control and format characters and splits on Unicode spaces", "[bert]") {
  // NUL, ZERO WIDTH SPACE (Cf), DEL (Cc) and U+FFFD vanish without splitting the word.
  const std::string dirty = std::string("a") + '\0' + "b\u200bc\x7f" "d\ufffde";
  CHECK(uncased().tokenize_to_strings(dirty) == Strings{"abc", "##de"});
  CHECK(cased().tokenize(dirty) == Ids{170, 1830, 1665, 2007});
  // LINE SEPARATOR survives cleaning but Python's str.split() splits on it; NBSP and the
  // ideographic space are Zs.
  CHECK(uncased().tokenize("Hello\u2028World") == Ids{7592, 2088});
  CHECK(uncased().tokenize("Hello\u00a0World\u3000!") == Ids{7592, 2088, 999});
  CHECK(uncased().tokenize("  \t\r\n ").empty());
  CHECK(uncased().tokenize("").empty());
  // Bytes that are not UTF-8 are dropped like U+FFFD rather than failing the document.
  CHECK(uncased().tokenize("ab\xff" "c") == uncased().tokenize("abc"));
}

TEST_CASE("bert WordPiece gives [UNK] for unmatched and over-long words", "[bert]") {
  CHECK(uncased().tokenize_to_strings("unaffable") == Strings{"una", "##ffa", "##ble"});
  CHECK(cased().tokenize_to_strings("unaffable") == Strings{"un", "##af", "##fa", "##ble"});
  CHECK(uncased().tokenize("\xf0\x9f\x98\x80 smile") == Ids{100, 2868});
  CHECK(uncased().tokenize("ﬁne") == Ids{1984, 2638});
  CHECK(uncased().tokenize("१२३ ١٢٣") == Ids{100, 100});

  std::string word200(200, 'a');
  std::vector<TokenId> ids = uncased().tokenize(word200);
  CHECK(ids.size() > 1);
  CHECK(std::find(ids.begin(), ids.end(), 100) == ids.end());
  CHECK(uncased().tokenize(word200 + "a") == Ids{100});
  // The limit counts characters after lower-casing, not bytes: 150 'é' are 300 bytes.
  std::string accented;
  for (int i = 0; i < 150; ++i) accented += "É";
  CHECK(uncased().tokenize(accented).size() > 1);
  CHECK(cased().tokenize(accented + accented) == Ids{100});
}

TEST_CASE("bert detokenize follows Megatron's decode", "[bert]") {
  BertWordPieceTokenizer& t = uncased();
  CHECK(t.detokenize(t.tokenize("Hello, world! It's unaffable; isn't it?")) ==
        "hello, world! it's unaffable ; isn't it?");  // no clean-up rule for " ;"
  CHECK(t.detokenize(Ids{}).empty());
  CHECK(t.detokenize(Ids{30522, 30523}) == "[BOS] [EOS]");
  CHECK_THROWS_AS(t.detokenize(Ids{30524}), Error);
  CHECK_THROWS_AS(t.detokenize(Ids{-1}), Error);
}

TEST_CASE("bert clones share the vocab and tokenize alike", "[bert]") {
  auto copy = uncased().clone();
  std::string text = "The quick brown fox jumps over the lazy dog. Ünïcödé!";
  CHECK(copy->tokenize(text) == uncased().tokenize(text));
  CHECK(copy->vocab_size() == uncased().vocab_size());
  CHECK(copy->eod() == uncased().eod());
  std::vector<TokenId> appended{7};
  copy->tokenize("hello", appended);
  CHECK(appended == Ids{7, 7592});
}

TEST_CASE("bert vocab loading reads lines like Python's text mode", "[bert]") {
  // CRLF and a lone CR both end a line; surrounding whitespace is stripped; a blank line is
  // the token "" with its own id; a duplicate keeps its last id and len(vocab) counts it once.
  std::string path = write_vocab(
      "lines", "[PAD]\r\n[UNK]\r[CLS]\n  [SEP]\t\n[MASK]\n\nhello\n##s\nhello\n##\xc3\xa9");
  auto t = BertWordPieceTokenizer::load(path, true);
  CHECK(t->token_to_id("[SEP]") == 3);
  CHECK(t->token_to_id("") == 5);
  CHECK(t->token_to_id("hello") == 8);
  CHECK(t->token_to_id("##é") == 9);
  CHECK(t->vocab_size() == 11);  // 9 distinct tokens + [BOS] + [EOS]
  CHECK(t->bos() == 9);           // len(vocab), although line 9 (##é) already has that id
  CHECK(t->eos() == 10);
  CHECK(t->tokenize("Hellos HELLO") == Ids{8, 7, 8});
  CHECK(t->tokenize("zzz") == Ids{1});
}

TEST_CASE("bert vocab errors name the file", "[bert]") {
  std::string missing = test::scratch_dir("bert-missing") + "/nope.txt";
  CHECK_THROWS_WITH(BertWordPieceTokenizer::load(missing, true), Catch::Contains("nope.txt"));
  std::string no_cls = write_vocab("no-cls", "[PAD]\n[UNK]\n[SEP]\n[MASK]\n");
  CHECK_THROWS_WITH(BertWordPieceTokenizer::load(no_cls, true),
                    Catch::Contains("vocab.txt") && Catch::Contains("[CLS]"));
  std::string bad = write_vocab("bad-utf8", "[PAD]\n[UNK]\n\xff\n");
  CHECK_THROWS_WITH(BertWordPieceTokenizer::load(bad, true), Catch::Contains("vocab.txt:3"));
  // Without [UNK], an unknown word fails at tokenize time (Megatron raises KeyError).
  std::string no_unk = write_vocab("no-unk", "[PAD]\n[CLS]\n[SEP]\n[MASK]\na\n");
  auto t = BertWordPieceTokenizer::load(no_unk, true);
  CHECK(t->tokenize("a A") == Ids{4, 4});
  CHECK_THROWS_WITH(t->tokenize("b"), Catch::Contains("[UNK]"));
}

// Run by tools/reference/bert_tokenize_reference.py: tokenizes length-prefixed texts with both
// bundled vocabularies and writes length-prefixed ids for comparison with Python.
TEST_CASE("bert reference exchange", "[.bert-reference]") {
  const char* input = std::getenv("MGT_BERT_REFERENCE_INPUT");
  const char* output = std::getenv("MGT_BERT_REFERENCE_OUTPUT");
  if (input == nullptr || output == nullptr) {
    WARN("set MGT_BERT_REFERENCE_INPUT and MGT_BERT_REFERENCE_OUTPUT (see the script)");
    return;
  }
  std::string data = slurp(input);
  std::vector<std::string> texts;
  for (std::size_t pos = 0; pos < data.size();) {
    std::uint32_t n;
    REQUIRE(pos + 4 <= data.size());
    std::memcpy(&n, data.data() + pos, 4);
    texts.push_back(data.substr(pos + 4, n));
    pos += 4 + n;
  }
  std::ofstream out(output, std::ios::binary);
  for (BertWordPieceTokenizer* t : {&uncased(), &cased()}) {
    for (const std::string& text : texts) {
      std::vector<TokenId> ids = t->tokenize(text);
      auto n = static_cast<std::uint32_t>(ids.size());
      out.write(reinterpret_cast<const char*>(&n), 4);
      out.write(reinterpret_cast<const char*>(ids.data()),
                static_cast<std::streamsize>(ids.size() * sizeof(TokenId)));
    }
  }
  REQUIRE(out.good());
}
