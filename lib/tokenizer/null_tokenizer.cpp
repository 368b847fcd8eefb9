// Megatron v0.13 `_NullTokenizer` (megatron/training/tokenizer/tokenizer.py), read at a commit
// after v0.13 (eod = V and vocab V + 1 match the spec's v0.13 check):
// `super().__init__(None, vocab_size=vocab_size)`, tokenize = [int(x) for x in text.split(' ')].
#include "tokenizer/null_tokenizer.hpp"

#include <unicode/uchar.h>

#include <limits>

#include "core/error.hpp"
#include "core/utf8.hpp"

namespace mgt {
namespace {

// Python's str.isspace(): int() skips these around the literal.
bool is_python_space(char32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
  if (cp == 0x85) return true;
  if (cp == utf8::kInvalid) return false;
  auto type = u_charType(static_cast<UChar32>(cp));
  return type == U_SPACE_SEPARATOR || type == U_LINE_SEPARATOR || type == U_PARAGRAPH_SEPARATOR;
}

// The value of a decimal digit in any script (int() accepts e.g. Arabic-Indic digits), or -1.
int decimal_value(char32_t cp) {
  if (cp >= '0' && cp <= '9') return static_cast<int>(cp - '0');
  if (cp < 0x80 || cp == utf8::kInvalid) return -1;
  if (u_charType(static_cast<UChar32>(cp)) != U_DECIMAL_DIGIT_NUMBER) return -1;
  return u_charDigitValue(static_cast<UChar32>(cp));
}

// A one-line rendering of the piece for error messages, quoted like Python's repr.
std::string quoted(std::string_view piece) {
  std::string s = "'";
  for (char c : piece) {
    if (c == '\n') s += "\\n";
    else if (c == '\r') s += "\\r";
    else if (c == '\t') s += "\\t";
    else if (c == '\\' || c == '\'') (s += '\\') += c;
    else s += c;
  }
  return s + "'";
}

[[noreturn]] void bad_literal(std::string_view piece) {
  throw Error("NullTokenizer: invalid literal for int() with base 10: " + quoted(piece));
}

// Python's int(piece) for base 10, limited to the TokenId range.
TokenId parse_python_int(std::string_view piece) {
  std::vector<char32_t> cps;
  for (std::size_t pos = 0; pos < piece.size();) cps.push_back(utf8::decode_next(piece, pos));
  std::size_t i = 0;
  std::size_t end = cps.size();
  while (i < end && is_python_space(cps[i])) ++i;
  while (end > i && is_python_space(cps[end - 1])) --end;
  bool negative = false;
  if (i < end && (cps[i] == '+' || cps[i] == '-')) negative = cps[i++] == '-';
  if (i == end) bad_literal(piece);
  std::int64_t value = 0;
  bool overflow = false;
  bool after_digit = false;  // '_' is allowed only between two digits
  for (; i < end; ++i) {
    if (cps[i] == '_') {
      if (!after_digit || i + 1 == end) bad_literal(piece);
      after_digit = false;
      continue;
    }
    int d = decimal_value(cps[i]);
    if (d < 0) bad_literal(piece);
    after_digit = true;
    if (!overflow) {
      value = value * 10 + d;
      overflow = value > std::int64_t{std::numeric_limits<TokenId>::max()} + 1;
    }
  }
  if (negative) value = -value;
  if (overflow || value > std::numeric_limits<TokenId>::max() ||
      value < std::numeric_limits<TokenId>::min()) {
    throw Error("NullTokenizer: token " + quoted(piece) + " does not fit in a 32-bit id");
  }
  return static_cast<TokenId>(value);
}

}  // namespace

NullTokenizer::NullTokenizer(std::int64_t vocab_size) : vocab_size_(vocab_size) {
  if (vocab_size < 0 || vocab_size >= std::numeric_limits<TokenId>::max()) {
    throw UsageError("--vocab-size " + std::to_string(vocab_size) +
                     " is out of range for NullTokenizer (0 to 2147483646)");
  }
}

TokenId NullTokenizer::token(std::string_view piece) const {
  const TokenId id = parse_python_int(piece);
  // Megatron stores any int; an id outside the vocabulary (eod, vocab_size, included) would only
  // fail later, in the model's embedding, far from the line that holds it.
  if (id < 0 || id > vocab_size_)
    throw Error("NullTokenizer: token " + quoted(piece) + " is outside the vocabulary [0, " +
                std::to_string(vocab_size_) + "] of --vocab-size " + std::to_string(vocab_size_));
  return id;
}

void NullTokenizer::tokenize(std::string_view text, std::vector<TokenId>& out) {
  for (std::size_t pos = 0;;) {
    std::size_t space = text.find(' ', pos);
    if (space == std::string_view::npos) {
      out.push_back(token(text.substr(pos)));
      return;
    }
    out.push_back(token(text.substr(pos, space - pos)));
    pos = space + 1;
  }
}

std::string NullTokenizer::detokenize(std::span<const TokenId> ids) const {
  std::string text;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) text += ' ';
    text += std::to_string(ids[i]);
  }
  return text;
}

std::unique_ptr<Tokenizer> NullTokenizer::clone() const {
  return std::make_unique<NullTokenizer>(vocab_size_);
}

std::vector<std::pair<std::string, std::string>> NullTokenizer::tokenizer_options() const {
  return {{"vocab_size", std::to_string(vocab_size_)}};
}

}  // namespace mgt
