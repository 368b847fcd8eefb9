// BERT WordPiece as Megatron v0.13 runs it (megatron/training/tokenizer/tokenizer.py
// `_BertWordPieceTokenizer` over bert_tokenization.py `FullTokenizer`).
//
// Checked against Megatron-LM's source (the megatron-core 0.13.0 wheel does not ship the
// megatron/training tokenizers; tokenizer.py was read at a commit after v0.13 and
// bert_tokenization.py at its older megatron/tokenizer/ location): the constructor call
// `super().__init__(vocab_file, lower_case=lower_case, vocab_extra_ids=vocab_extra_ids)`, so
// the options are "lower_case" -> "True"/"False" and "vocab_extra_ids" -> str(n); [BOS], [EOS]
// and <extra_id_i> added at id len(vocab); eod = [EOS]; the basic and WordPiece algorithm.
// Python's str.lower(), NFD and categories come from its own Unicode tables, ICU's from
// its own: with equal Unicode versions (ICU 72 and Python 3.12: 15.0) the two agree on every
// code point (tools/reference/bert_tokenize_reference.py); otherwise characters assigned
// between the versions are classified differently.
#include "tokenizer/bert_wordpiece_tokenizer.hpp"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf16.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <functional>
#include <sstream>
#include <unordered_map>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/utf8.hpp"

namespace mgt {
namespace {

// Megatron's WordpieceTokenizer default: longer words become [UNK] without being matched.
constexpr std::size_t kMaxCharsPerWord = 200;

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>>;

bool is_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Like utf8::decode_next, but a UTF-8-encoded lone surrogate (ED A0..BF 80..BF), which Python's
// json.loads can produce from a "\udXXX" escape and our readers keep, decodes to itself:
// Python treats such a character as an ordinary letter-like code point (category Cs).
char32_t decode_wtf8(std::string_view s, std::size_t& pos) {
  std::size_t start = pos;
  char32_t cp = utf8::decode_next(s, pos);
  if (cp != utf8::kInvalid || start + 3 > s.size()) return cp;
  auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[start + i]); };
  if (b(0) == 0xED && b(1) >= 0xA0 && b(1) <= 0xBF && (b(2) & 0xC0) == 0x80) {
    pos = start + 3;
    return 0xD000 | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  }
  return cp;
}

// Python's str.isspace(), which str.split() and str.strip() use.
bool is_python_space(char32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  if (cp == 0x85) return true;
  auto type = u_charType(static_cast<UChar32>(cp));
  return type == U_SPACE_SEPARATOR || type == U_LINE_SEPARATOR || type == U_PARAGRAPH_SEPARATOR;
}

std::string_view python_strip(std::string_view s) {
  std::size_t begin = 0;
  std::size_t end = 0;
  bool seen = false;
  for (std::size_t pos = 0; pos < s.size();) {
    std::size_t at = pos;
    if (!is_python_space(decode_wtf8(s, pos))) {
      if (!seen) begin = at;
      seen = true;
      end = pos;
    }
  }
  return seen ? s.substr(begin, end - begin) : std::string_view{};
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string result;
  std::size_t pos = 0;
  for (std::size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    result.append(s, pos, hit - pos);
    result.append(to);
  }
  if (pos == 0) return;
  result.append(s, pos);
  s = std::move(result);
}

// Megatron's "chinese character" blocks: CJK Unified Ideographs and extensions A-E,
// compatibility ideographs and their supplement (not Hiragana, Katakana or Hangul).
bool is_cjk(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// All non-alphanumeric printable ASCII counts as punctuation, plus Unicode categories P*.
bool is_ascii_punct(unsigned c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
         (c >= 123 && c <= 126);
}
bool is_punct(char32_t cp) {
  if (cp < 0x80) return is_ascii_punct(cp);
  if (cp >= 0xD800 && cp <= 0xDFFF) return false;
  return (U_GET_GC_MASK(static_cast<UChar32>(cp)) & U_GC_P_MASK) != 0;
}

// How the text-cleaning and whitespace-splitting stage treats one character.
enum class CharClass : unsigned char { kDrop, kSpace, kCjk, kWord };

constexpr std::array<CharClass, 128> make_ascii_classes() {
  std::array<CharClass, 128> table{};
  for (unsigned c = 0; c < 128; ++c) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') table[c] = CharClass::kSpace;
    else if (c < 0x20 || c == 0x7F) table[c] = CharClass::kDrop;  // Cc, and NUL
    else table[c] = CharClass::kWord;
  }
  return table;
}
constexpr auto kAsciiClasses = make_ascii_classes();

CharClass classify(char32_t cp) {
  if (cp < 0x80) return kAsciiClasses[cp];
  if (cp == utf8::kInvalid || cp == 0xFFFD) return CharClass::kDrop;
  if (cp >= 0xD800 && cp <= 0xDFFF) return CharClass::kWord;
  switch (u_charType(static_cast<UChar32>(cp))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
      return CharClass::kDrop;
    // Zs is turned into a space by the cleaning; Zl and Zp (U+2028, U+2029) survive it but
    // Python's str.split() still splits on them.
    case U_SPACE_SEPARATOR:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
      return CharClass::kSpace;
    default:
      return is_cjk(cp) ? CharClass::kCjk : CharClass::kWord;
  }
}

std::string read_file(const std::string& path) { return read_input_file(path, "BERT vocab file"); }

}  // namespace

struct BertWordPieceTokenizer::Vocab {
  std::string file;
  bool lower_case = true;
  int extra_ids = 0;
  TokenMap initial;       // every token, matched at the start of a word
  TokenMap continuation;  // tokens that begin with "##", stored without it
  std::size_t max_initial_bytes = 0;
  std::size_t max_continuation_bytes = 0;
  std::vector<std::optional<std::string>> id_to_token;
  std::int64_t size = 0;  // Python's len(vocab): distinct tokens
  std::optional<TokenId> unk;
  TokenId cls = 0, sep = 0, pad = 0, mask = 0, bos = 0, eos = 0;

  // A repeated token keeps only its last id, and the earlier id decodes to nothing, as with
  // Megatron's dict and its inverse.
  void set(std::string token, TokenId id) {
    if (auto it = initial.find(token); it != initial.end()) {
      if (id_to_token[it->second] == token) id_to_token[it->second].reset();
    } else {
      ++size;
    }
    if (id_to_token.size() <= static_cast<std::size_t>(id)) id_to_token.resize(id + 1);
    id_to_token[id] = token;
    initial.insert_or_assign(std::move(token), id);
  }

  // Megatron's add_token: a missing token gets the id len(vocab).
  TokenId add(const std::string& token) {
    if (auto it = initial.find(token); it != initial.end()) return it->second;
    TokenId id = static_cast<TokenId>(size);
    set(token, id);
    return id;
  }

  TokenId require(std::string_view token) const {
    auto it = initial.find(token);
    if (it == initial.end()) {
      throw Error(file + ": BERT vocab has no " + std::string(token) + " token");
    }
    return it->second;
  }

  void index() {
    for (const auto& [token, id] : initial) {
      max_initial_bytes = std::max(max_initial_bytes, token.size());
      if (token.starts_with("##")) {
        continuation.emplace(token.substr(2), id);
        max_continuation_bytes = std::max(max_continuation_bytes, token.size() - 2);
      }
    }
    if (auto it = initial.find("[UNK]"); it != initial.end()) unk = it->second;
  }
};

// Reusable buffers, so a long run of tokenize() calls allocates little.
class BertWordPieceTokenizer::Impl {
public:
  explicit Impl(const Vocab& vocab) : vocab_(vocab) {
    UErrorCode status = U_ZERO_ERROR;
    nfd_ = icu::Normalizer2::getNFDInstance(status);  // owned by ICU
    if (U_FAILURE(status)) {
      throw Error(std::string("ICU NFD normalizer unavailable: ") + u_errorName(status));
    }
  }

  void run(std::string_view text, std::vector<TokenId>& out) {
    out_ = &out;
    word_.clear();
    word_ascii_ = true;
    for (std::size_t pos = 0; pos < text.size();) {
      auto byte = static_cast<unsigned char>(text[pos]);
      if (byte < 0x80) {
        CharClass c = kAsciiClasses[byte];
        if (c == CharClass::kWord) word_ += static_cast<char>(byte);
        else if (c == CharClass::kSpace) flush_word();
        ++pos;
        continue;
      }
      std::size_t start = pos;
      char32_t cp = decode_wtf8(text, pos);  // invalid bytes count as U+FFFD: dropped
      switch (classify(cp)) {
        case CharClass::kDrop:
          break;
        case CharClass::kSpace:
          flush_word();
          break;
        case CharClass::kCjk:  // a word of its own
          flush_word();
          word_.append(text.substr(start, pos - start));
          word_ascii_ = false;
          flush_word();
          break;
        case CharClass::kWord:
          word_.append(text.substr(start, pos - start));
          word_ascii_ = false;
          break;
      }
    }
    flush_word();
  }

private:
  struct Piece {
    std::size_t begin, end, chars;
  };

  void flush_word() {
    if (word_.empty()) return;
    pieces_.clear();
    if (word_ascii_) split_ascii_word();
    else split_unicode_word();
    for (const Piece& p : pieces_) {
      wordpiece(std::string_view(*piece_text_).substr(p.begin, p.end - p.begin), p.chars);
    }
    word_.clear();
    word_ascii_ = true;
  }

  // ASCII needs neither case mapping tables nor normalization.
  void split_ascii_word() {
    if (vocab_.lower_case) {
      for (char& c : word_) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      }
    }
    std::size_t run = 0;
    for (std::size_t i = 0; i < word_.size(); ++i) {
      if (is_ascii_punct(static_cast<unsigned char>(word_[i]))) {
        if (i > run) pieces_.push_back({run, i, i - run});
        pieces_.push_back({i, i + 1, 1});
        run = i + 1;
      }
    }
    if (word_.size() > run) pieces_.push_back({run, word_.size(), word_.size() - run});
    piece_text_ = &word_;
  }

  void split_unicode_word() {
    transformed_.clear();
    std::size_t run = 0;
    std::size_t run_chars = 0;
    auto add = [&](char32_t cp) {
      if (is_punct(cp)) {
        if (run_chars > 0) pieces_.push_back({run, transformed_.size(), run_chars});
        std::size_t at = transformed_.size();
        utf8::append(transformed_, cp);
        pieces_.push_back({at, transformed_.size(), 1});
        run = transformed_.size();
        run_chars = 0;
      } else {
        utf8::append(transformed_, cp);
        ++run_chars;
      }
    };
    if (vocab_.lower_case) {
      // Python lower-cases the whole whitespace-delimited word (so Final_Sigma sees its
      // neighbours across punctuation), then NFD, then drops non-spacing marks (Mn).
      utf16_.remove();
      for (std::size_t pos = 0; pos < word_.size();) {
        char32_t cp = decode_wtf8(word_, pos);
        if (cp <= 0xFFFF) utf16_.append(static_cast<char16_t>(cp));
        else utf16_.append(static_cast<UChar32>(cp));
      }
      utf16_.toLower(icu::Locale::getRoot());
      UErrorCode status = U_ZERO_ERROR;
      nfd_->normalize(utf16_, normalized_, status);
      if (U_FAILURE(status)) {
        throw Error(std::string("ICU NFD normalization failed: ") + u_errorName(status));
      }
      for (int32_t i = 0; i < normalized_.length();) {
        UChar32 c = normalized_.char32At(i);
        i += U16_LENGTH(c);
        if (u_charType(c) != U_NON_SPACING_MARK) add(static_cast<char32_t>(c));
      }
    } else {
      for (std::size_t pos = 0; pos < word_.size();) add(decode_wtf8(word_, pos));
    }
    if (run_chars > 0) pieces_.push_back({run, transformed_.size(), run_chars});
    piece_text_ = &transformed_;
  }

  // Greedy longest-match-first; one unmatched position turns the whole word into [UNK].
  void wordpiece(std::string_view word, std::size_t chars) {
    std::vector<TokenId>& out = *out_;
    if (chars > kMaxCharsPerWord) {
      out.push_back(unk());
      return;
    }
    const std::size_t mark = out.size();
    for (std::size_t start = 0; start < word.size();) {
      const TokenMap& map = start == 0 ? vocab_.initial : vocab_.continuation;
      std::size_t longest = start == 0 ? vocab_.max_initial_bytes : vocab_.max_continuation_bytes;
      // Substrings longer than any token cannot match, so start below them.
      std::size_t end = std::min(word.size(), start + longest);
      while (end > start && end < word.size() && is_continuation_byte(word[end])) --end;
      bool matched = false;
      while (end > start) {
        if (auto it = map.find(word.substr(start, end - start)); it != map.end()) {
          out.push_back(it->second);
          start = end;
          matched = true;
          break;
        }
        do --end; while (end > start && is_continuation_byte(word[end]));
      }
      if (!matched) {
        out.resize(mark);
        out.push_back(unk());
        return;
      }
    }
  }

  TokenId unk() const {
    if (!vocab_.unk) throw Error(vocab_.file + ": text needs [UNK] but the BERT vocab has none");
    return *vocab_.unk;
  }

  const Vocab& vocab_;
  const icu::Normalizer2* nfd_ = nullptr;
  std::vector<TokenId>* out_ = nullptr;
  std::string word_;
  bool word_ascii_ = true;
  std::string transformed_;
  const std::string* piece_text_ = nullptr;
  std::vector<Piece> pieces_;
  icu::UnicodeString utf16_;
  icu::UnicodeString normalized_;
};

std::unique_ptr<BertWordPieceTokenizer> BertWordPieceTokenizer::load(const std::string& vocab_file,
                                                                     bool lower_case,
                                                                     int vocab_extra_ids) {
  std::string data = read_file(vocab_file);
  if (auto bad = utf8::find_invalid(data)) {
    auto line = 1 + std::count(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(*bad), '\n');
    throw Error(vocab_file + ":" + std::to_string(line) + ": invalid UTF-8 in BERT vocab");
  }
  auto vocab = std::make_shared<Vocab>();
  vocab->file = vocab_file;
  vocab->lower_case = lower_case;
  vocab->extra_ids = vocab_extra_ids;
  // Python's text mode: lines end at "\n", "\r\n" or a lone "\r"; a blank line is a token "".
  TokenId line = 0;
  for (std::size_t pos = 0; pos < data.size(); ++line) {
    std::size_t eol = data.find_first_of("\r\n", pos);
    if (eol == std::string::npos) eol = data.size();
    vocab->set(std::string(python_strip(std::string_view(data).substr(pos, eol - pos))), line);
    pos = eol + 1;
    if (eol + 1 < data.size() && data[eol] == '\r' && data[eol + 1] == '\n') ++pos;
  }
  vocab->cls = vocab->require("[CLS]");
  vocab->sep = vocab->require("[SEP]");
  vocab->pad = vocab->require("[PAD]");
  vocab->mask = vocab->require("[MASK]");
  vocab->bos = vocab->add("[BOS]");
  vocab->eos = vocab->add("[EOS]");
  for (int i = 0; i < vocab_extra_ids; ++i) vocab->add("<extra_id_" + std::to_string(i) + ">");
  vocab->index();
  return std::make_unique<BertWordPieceTokenizer>(std::move(vocab));
}

BertWordPieceTokenizer::BertWordPieceTokenizer(std::shared_ptr<const Vocab> vocab)
    : vocab_(std::move(vocab)), impl_(std::make_unique<Impl>(*vocab_)) {}

BertWordPieceTokenizer::~BertWordPieceTokenizer() = default;

void BertWordPieceTokenizer::tokenize(std::string_view text, std::vector<TokenId>& out) {
  impl_->run(text, out);
}

std::vector<std::string> BertWordPieceTokenizer::tokenize_to_strings(std::string_view text) {
  std::vector<std::string> tokens;
  for (TokenId id : tokenize(text)) tokens.push_back(*vocab_->id_to_token[id]);
  return tokens;
}

std::string BertWordPieceTokenizer::detokenize(std::span<const TokenId> ids) const {
  std::string text;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    TokenId id = ids[i];
    if (id < 0 || static_cast<std::size_t>(id) >= vocab_->id_to_token.size() ||
        !vocab_->id_to_token[id]) {
      throw Error("BERT detokenize: id " + std::to_string(id) + " is not in the vocab " +
                  vocab_->file);
    }
    if (i > 0) text += ' ';
    text += *vocab_->id_to_token[id];
  }
  replace_all(text, " ##", "");
  text = std::string(python_strip(text));
  static constexpr std::pair<std::string_view, std::string_view> kCleanUps[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},     {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kCleanUps) replace_all(text, from, to);
  return text;
}

std::unique_ptr<Tokenizer> BertWordPieceTokenizer::clone() const {
  return std::make_unique<BertWordPieceTokenizer>(vocab_);
}

std::int64_t BertWordPieceTokenizer::vocab_size() const { return vocab_->size; }
std::optional<TokenId> BertWordPieceTokenizer::pad() const { return vocab_->pad; }
TokenId BertWordPieceTokenizer::cls() const { return vocab_->cls; }
TokenId BertWordPieceTokenizer::sep() const { return vocab_->sep; }
TokenId BertWordPieceTokenizer::mask() const { return vocab_->mask; }
TokenId BertWordPieceTokenizer::bos() const { return vocab_->bos; }
TokenId BertWordPieceTokenizer::eos() const { return vocab_->eos; }
bool BertWordPieceTokenizer::lower_case() const { return vocab_->lower_case; }

std::optional<TokenId> BertWordPieceTokenizer::token_to_id(std::string_view token) const {
  auto it = vocab_->initial.find(token);
  if (it == vocab_->initial.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> BertWordPieceTokenizer::tokenizer_paths() const { return {vocab_->file}; }

std::vector<std::pair<std::string, std::string>> BertWordPieceTokenizer::tokenizer_options() const {
  return {{"lower_case", vocab_->lower_case ? "True" : "False"},
          {"vocab_extra_ids", std::to_string(vocab_->extra_ids)}};
}

}  // namespace mgt
