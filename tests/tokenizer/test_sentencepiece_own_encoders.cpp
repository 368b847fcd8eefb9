// mgt's own SentencePiece encoders (BPE, and unigram with its normalizer) against the
// SentencePiece library they stand in for: the same model loaded twice, once with the library
// alone, must give the same ids for every text.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "test_paths.hpp"
#include "tokenizer/sentencepiece_tokenizer.hpp"

using namespace mgt;
using Kind = SentencePieceTokenizer::Kind;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Lines, and paragraphs (runs of lines up to a blank one, newlines kept), of a bundled file.
std::vector<std::string> corpus_texts(const std::string& name, std::size_t max_bytes) {
  std::string all = read_file(test::dataset_path(name));
  if (all.size() > max_bytes) all.resize(max_bytes);
  std::vector<std::string> texts;
  std::string paragraph;
  std::istringstream in(all);
  for (std::string line; std::getline(in, line);) {
    texts.push_back(line);
    if (line.empty() && !paragraph.empty()) {
      texts.push_back(paragraph);
      paragraph.clear();
    } else {
      paragraph += line + "\n";
    }
  }
  texts.push_back(paragraph);
  return texts;
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::vector<std::string> adversarial_texts() {
  std::vector<std::string> t = {
      "", " ", "  ", "   a", "a ", "a  ", " a  b   c ", "\t", "a\tb", " \t x", "\n", "a\n\nb", " \n ",
      "\r\n", "12345678901234567890", "3.14159 2,718", "a1b2c3", "x 007 y", "\xF0\x9F\x98\x80",
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 family",
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88",
      "\xE4\xB8\xAD\xE6\x96\x87 \xE6\xB8\xAC\xE8\xA9\xA6", "e\xCC\x81 cafe\xCC\x81 Z\xCD\x91\xCD\xAB\xCC\x93",
      "\xE2\x96\x81", "\xE2\x96\x81\xE2\x96\x81x", " \xE2\x96\x81 ", "x\xE2\x96\x81y", "the\xE2\x96\x81", "<s>",
      "</s>", "<unk>", "<0x41>", "a<s>b", "\xEF\xBF\xBD", "a\xEF\xBF\xBD b", std::string("\0", 1),
      std::string("a\0b", 3), "caf\xC3\xA9 na\xC3\xAFve \xC3\x85ngstr\xC3\xB6m", "\xC2\xA0nbsp\xE3\x80\x80ideo",
      "\xE2\x80\x8B zero width", "\xF4\x8F\xBF\xBF max", "\xEE\x80\x80 private",
      // Not UTF-8: a lone continuation, a stray lead, overlong forms, a surrogate, above U+10FFFF,
      // truncated sequences.
      "\xC3\x28", "\xFF", "abc\x80" "def", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xC0\xAF", "\xE0\x80\xAF",
      "\xE2\x96", "x \xE2\x96", "\xF0\x9F\x98", "ok \xC3"};
  t.push_back(repeat("a", 5000));
  t.push_back(repeat(" ", 300));
  t.push_back(repeat("the ", 400));
  t.push_back(repeat("\xE6\x97\xA5\xE6\x9C\xAC", 300));  // one word far longer than the cache keys
  t.push_back(repeat("9", 1000));
  t.push_back(repeat("\xF0\x9F\x98\x80", 100));
  return t;
}

// Random texts over an alphabet of spaces, common letters, digits and rarer characters.
std::vector<std::string> random_texts(int count, unsigned seed) {
  const std::vector<std::string> alphabet = {" ", " ", " ", "e", "t", "h", "a", "n", "s", "r", "i", "o", "T",
                                             "\n", "\t", "1", "0", ".", ",", "'", "\xC3\xA9", "\xE6\x97\xA5",
                                             "\xF0\x9F\x98\x80", "\xE2\x96\x81", "\xCC\x81", "\xEF\xBF\xBD", "<",
                                             // What NFKC-style maps rewrite: fullwidth, ligature,
                                             // circled, half-width, soft hyphen, controls, odd spaces.
                                             "\xEF\xBC\xA1", "\xEF\xAC\x81", "\xE2\x91\xA0", "\xEF\xBD\xB6",
                                             "\xC2\xAD", "\x01", "\x7F", "\xE3\x80\x80", "\xC2\xA0", "\xE2\x80\x8D",
                                             "\xE2\x84\xA2", "\xC2\xBD", "\r"};
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string s;
    const int n = static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) s += alphabet[rng() % alphabet.size()];
    out.push_back(s);
  }
  return out;
}

// Random runs of the model's own pieces (U+2581 as a space), which exercise its merges.
std::vector<std::string> piece_texts(const std::string& model_file, int count, unsigned seed) {
  sentencepiece::SentencePieceProcessor sp;
  REQUIRE(sp.Load(model_file).ok());
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) {
      std::string piece = sp.IdToPiece(static_cast<int>(rng() % sp.GetPieceSize()));
      for (std::size_t at; (at = piece.find("\xE2\x96\x81")) != std::string::npos;) piece.replace(at, 3, " ");
      s += piece;
    }
    out.push_back(s);
  }
  return out;
}

std::vector<std::string> all_texts(const std::string& model_file) {
  std::vector<std::string> texts = adversarial_texts();
  for (const char* name : {"tinyshakespeare.txt", "wikitext-2.wiki.test.tokens", "corpus-gutenberg.jsonl",
                           "lambada_test.jsonl"})
    for (auto& s : corpus_texts(name, 400'000)) texts.push_back(std::move(s));
  for (auto& s : random_texts(3000, 7)) texts.push_back(std::move(s));
  for (auto& s : piece_texts(model_file, 3000, 11)) texts.push_back(std::move(s));
  return texts;
}

// Every text, twice over (the second time from the word cache), through both paths. Unigram
// models: mgt follows the Python package (0.2.x; test_sentencepiece_tokenizer.cpp checks its ids),
// which sums path scores in float and rescales them past 100,000, where Debian's library (0.1.97)
// sums in double: texts under 16 KiB are compared, and where the two break a tie between
// equal-scoring segmentations differently, they must be the same pieces in another order.
void check_same_ids(const std::string& model_file, Kind kind, bool unigram = false) {
  auto own = SentencePieceTokenizer::load(model_file, kind);
  auto library = SentencePieceTokenizer::load(model_file, kind, 0, /*use_own_encoder=*/false);
  std::string why_not;
  INFO(model_file);
  REQUIRE(own->uses_own_encoder(&why_not));
  REQUIRE_FALSE(library->uses_own_encoder());
  const auto texts = all_texts(model_file);
  std::size_t differ = 0, ties = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& text : texts) {
      if (unigram && text.size() >= 16384) continue;
      const auto expected = library->tokenize(text);
      const auto got = own->tokenize(text);
      if (got == expected) continue;
      if (unigram && library->detokenize(got) == library->detokenize(expected)) {
        auto a = got, b = expected;
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        if (a == b) {
          ++ties;
          continue;
        }
      }
      if (++differ <= 5) {
        UNSCOPED_INFO("differs on \"" << text << "\" (" << text.size() << " bytes)");
      }
    }
  CHECK(differ == 0);
  // Ties are rare: a handful of texts, not a different algorithm.
  CHECK(ties <= texts.size() / 20);
}

// A small model trained here (BPE unless `type` says otherwise) with the given trainer options.
std::string train_model(const std::string& name, const std::string& options, const std::string& type = "bpe") {
  const std::string dir = test::scratch_dir("spm-" + type + "-" + name);
  std::ostringstream args;
  args << "--input=" << test::dataset_path("tinyshakespeare.txt") << " --model_prefix=" << dir << "/m"
       << " --vocab_size=600 --model_type=" << type << " --input_sentence_size=20000 --num_threads=1 --minloglevel=2 "
       << options;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args.str());
  REQUIRE(status.ok());
  return dir + "/m.model";
}

// A SentencePiece BPE model written here piece by piece (protobuf wire format): <unk>, <s>,
// </s>, the byte pieces when byte_fallback, then `pieces` with their scores; identity
// normalizer that keeps whitespace as it is.
std::string write_model(const std::string& name, const std::vector<std::pair<std::string, float>>& pieces,
                        bool byte_fallback) {
  auto varint = [](std::string& out, std::uint64_t v) {
    for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7f) | 0x80);
    out += static_cast<char>(v);
  };
  auto field_bytes = [&](std::string& out, int field, const std::string& bytes) {
    varint(out, static_cast<std::uint64_t>(field) << 3 | 2);
    varint(out, bytes.size());
    out += bytes;
  };
  auto field_varint = [&](std::string& out, int field, std::uint64_t v) {
    varint(out, static_cast<std::uint64_t>(field) << 3);
    varint(out, v);
  };
  std::string proto;
  auto piece = [&](const std::string& text, float score, int type) {
    std::string p;
    field_bytes(p, 1, text);
    varint(p, 2 << 3 | 5);
    p.append(reinterpret_cast<const char*>(&score), 4);
    field_varint(p, 3, static_cast<std::uint64_t>(type));
    field_bytes(proto, 1, p);
  };
  piece("<unk>", 0, 2);
  piece("<s>", 0, 3);
  piece("</s>", 0, 3);
  if (byte_fallback)
    for (int b = 0; b < 256; ++b) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "<0x%02X>", b);
      piece(hex, 0, 6);
    }
  for (const auto& [text, score] : pieces) piece(text, score, 1);
  std::string trainer;
  field_varint(trainer, 3, 2);  // model_type BPE
  field_varint(trainer, 35, byte_fallback);
  field_varint(trainer, 40, 0);  // unk_id
  field_varint(trainer, 41, 1);  // bos_id
  field_varint(trainer, 42, 2);  // eos_id
  field_bytes(proto, 2, trainer);
  std::string normalizer;
  field_bytes(normalizer, 1, "identity");
  field_varint(normalizer, 4, 0);  // remove_extra_whitespaces
  field_bytes(proto, 3, normalizer);
  const std::string path = test::scratch_dir("spm-bpe-" + name) + "/m.model";
  std::ofstream(path, std::ios::binary) << proto;
  return path;
}

}  // namespace

TEST_CASE("sentencepiece bpe: the bundled Llama-style model gives the library's ids", "[sentencepiece][tokenizer]") {
  check_same_ids(test::dataset_path("tokenizer-tests/spm-llama-bpe.model"), Kind::kGpt);
}

TEST_CASE("sentencepiece bpe: the Megatron kinds give the library's ids around special tokens",
          "[sentencepiece][tokenizer]") {
  const std::string model = test::dataset_path("tokenizer-tests/spm-llama-bpe.model");
  for (Kind kind : {Kind::kLlama2, Kind::kSentencePiece}) {
    auto own = SentencePieceTokenizer::load(model, kind, 3);
    auto library = SentencePieceTokenizer::load(model, kind, 3, false);
    for (const std::string text : {"a<EOD>b", " <MASK> x <extra_id_2>", "<CLS><SEP>", "plain text"})
      CHECK(own->tokenize(text) == library->tokenize(text));
  }
}

TEST_CASE("sentencepiece bpe: a model trained without byte fallback or dummy prefix gives the library's ids",
          "[sentencepiece][tokenizer]") {
  const std::string model = train_model(
      "plain", "--normalization_rule_name=identity --remove_extra_whitespaces=false --add_dummy_prefix=false "
               "--byte_fallback=false --character_coverage=0.98 --split_digits=false");
  check_same_ids(model, Kind::kGpt);
}

TEST_CASE("sentencepiece bpe: pieces that span words and tied scores give the library's ids",
          "[sentencepiece][tokenizer]") {
  // Pieces with U+2581 inside ("e_t", "a_") forbid cutting the text into words, so the encoder
  // merges over the whole text; equal scores exercise the leftmost-first tie break.
  const std::string u = "\xE2\x96\x81";
  const std::vector<std::pair<std::string, float>> pieces = {
      {"a", -1}, {"b", -1}, {"e", -1}, {"t", -1}, {"h", -1}, {u, -1}, {"1", -1}, {"\xC3\xA9", -1},
      {"th", -2}, {"he", -2}, {"the", -3}, {u + "t", -2}, {"e" + u + "t", -2}, {"a" + u, -3}, {u + u, -2},
      {u + u + u, -4}, {"ab", -3}, {"ba", -3}, {"bab", -3}, {"aba", -3}, {"11", -5}, {u + "the", -2},
      {"et", -2}, {"ea", -2}, {"at", -2}, {"h" + u, -6}, {"\xC3\xA9" + u, -2}};
  const std::string model = write_model("spanning", pieces, /*byte_fallback=*/false);
  check_same_ids(model, Kind::kGpt);
  const std::string with_bytes = write_model("spanning-bytes", pieces, /*byte_fallback=*/true);
  check_same_ids(with_bytes, Kind::kGpt);
}

TEST_CASE("sentencepiece bpe: models with settings it does not reproduce stay with the library",
          "[sentencepiece][tokenizer]") {
  std::string why_not;
  const std::string char_model = train_model("char", "", "char");
  CHECK_FALSE(SentencePieceTokenizer::load(char_model, Kind::kGpt)->uses_own_encoder(&why_not));
  CHECK(why_not == "not a BPE model");

  // The trainer's defaults: NFKC normalization and removal of extra whitespace.
  const std::string nfkc = train_model("nfkc", "");
  auto normalized = SentencePieceTokenizer::load(nfkc, Kind::kGpt);
  CHECK_FALSE(normalized->uses_own_encoder(&why_not));
  CHECK(why_not == "the normalizer maps characters");
  sentencepiece::SentencePieceProcessor sp;
  REQUIRE(sp.Load(nfkc).ok());
  for (const auto& text : adversarial_texts()) {
    std::vector<int> expected;
    REQUIRE(sp.Encode(text, &expected).ok());
    CHECK(normalized->tokenize(text) == std::vector<TokenId>(expected.begin(), expected.end()));
  }

  const std::string user = train_model("user", "--normalization_rule_name=identity --remove_extra_whitespaces=false "
                                               "--user_defined_symbols=thou,<sep>");
  CHECK_FALSE(SentencePieceTokenizer::load(user, Kind::kGpt)->uses_own_encoder(&why_not));
  CHECK(why_not == "the model has user-defined pieces");

  const std::string squeeze = train_model("squeeze", "--normalization_rule_name=identity");
  CHECK_FALSE(SentencePieceTokenizer::load(squeeze, Kind::kGpt)->uses_own_encoder(&why_not));
  CHECK(why_not == "the normalizer removes extra whitespace");
}

TEST_CASE("sentencepiece unigram: the bundled nmt_nfkc model gives the library's ids", "[sentencepiece][tokenizer]") {
  check_same_ids(test::dataset_path("tokenizer-tests/spm-unigram.model"), Kind::kGpt, true);
}

TEST_CASE("sentencepiece unigram: the Megatron kinds give the library's ids around special tokens",
          "[sentencepiece][tokenizer]") {
  const std::string model = test::dataset_path("tokenizer-tests/spm-unigram.model");
  for (Kind kind : {Kind::kSentencePiece, Kind::kGpt}) {
    auto own = SentencePieceTokenizer::load(model, kind, 3);
    auto library = SentencePieceTokenizer::load(model, kind, 3, false);
    REQUIRE(own->uses_own_encoder());
    for (const std::string text : {"a<EOD>b", " <MASK> x <extra_id_2>", "<CLS><SEP>", "plain text", "\xEF\xBC\xA1<EOD>"})
      CHECK(own->tokenize(text) == library->tokenize(text));
  }
}

TEST_CASE("sentencepiece unigram: models trained with other normalizers and byte fallback give the library's ids",
          "[sentencepiece][tokenizer]") {
  // Llama-like settings on a unigram model: identity normalizer, whitespace kept, bytes for
  // unknown characters.
  check_same_ids(train_model("identity-bytes",
                             "--normalization_rule_name=identity --remove_extra_whitespaces=false --byte_fallback=true "
                             "--character_coverage=0.98",
                             "unigram"),
                 Kind::kGpt, true);
  // Case folding NFKC, no dummy prefix, unknown characters as <unk>.
  check_same_ids(train_model("nfkc-cf", "--normalization_rule_name=nfkc_cf --add_dummy_prefix=false "
                                        "--character_coverage=0.98",
                             "unigram"),
                 Kind::kGpt, true);
}

TEST_CASE("sentencepiece unigram: models with user-defined pieces stay with the library", "[sentencepiece][tokenizer]") {
  std::string why_not;
  const std::string user = train_model("user", "--user_defined_symbols=thou,<sep>", "unigram");
  auto own = SentencePieceTokenizer::load(user, Kind::kGpt);
  CHECK_FALSE(own->uses_own_encoder(&why_not));
  CHECK(why_not == "user-defined pieces (the normalizer matches them first)");
  auto library = SentencePieceTokenizer::load(user, Kind::kGpt, 0, false);
  for (const std::string text : {"thou art <sep> here", "  thou\tthee  "}) CHECK(own->tokenize(text) == library->tokenize(text));
}
