#include "tokenizer/gpt2_vocab_files.hpp"

#include <simdjson.h>

#include <array>
#include <unordered_map>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/mapped_file.hpp"
#include "core/utf8.hpp"
#include "tokenizer/unicode_class.hpp"

namespace mgt::gpt2 {
namespace {

using unicode::PretokenClass;
using unicode::PretokenClasses;

// GPT-2's byte alphabet: every byte is shown as a printable code point so that token strings in
// the vocab and merges files never contain whitespace or control characters.

// Code point -> byte, -1 outside the alphabet. Bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF stand for
// themselves; the other 68 take U+0100, U+0101, ... in byte order.
using ByteAlphabet = std::array<std::int16_t, 0x144>;

constexpr ByteAlphabet make_byte_alphabet() {
  ByteAlphabet to_byte{};
  for (auto& b : to_byte) b = -1;
  char32_t next_extra = 0x100;
  for (int b = 0; b < 256; ++b) {
    bool kept = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    to_byte[kept ? static_cast<char32_t>(b) : next_extra++] = static_cast<std::int16_t>(b);
  }
  return to_byte;
}

constexpr ByteAlphabet kAlphabet = make_byte_alphabet();

// str.isspace() as used by str.split(): Unicode White_Space plus U+001C..U+001F.
bool python_isspace(char32_t cp) {
  if (cp >= 0x1C && cp <= 0x1F) return true;
  return cp < 0x110000 && PretokenClasses::instance().of(cp) == PretokenClass::kSpace;
}

}  // namespace

bool alphabet_to_bytes(std::string_view token, std::string& bytes) {
  bytes.clear();
  std::size_t pos = 0;
  while (pos < token.size()) {
    char32_t cp = utf8::decode_next(token, pos);
    if (cp >= kAlphabet.size() || kAlphabet[cp] < 0) return false;
    bytes += static_cast<char>(kAlphabet[cp]);
  }
  return true;
}

[[noreturn]] void fail_file(const char* what, const std::string& path, const std::string& why) {
  throw Error(std::string(what) + " '" + path + "': " + why);
}

std::vector<VocabEntry> read_vocab(const std::string& path) {
  constexpr const char* what = "GPT-2 vocab file";
  MappedFile file = [&] {
    try {
      return MappedFile(path);
    } catch (const Error& e) {
      throw Error(std::string(what) + ": " + e.what());
    }
  }();
  simdjson::padded_string json(file.view());
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  simdjson::dom::object object;
  auto bad = [&](simdjson::error_code code) {
    fail_file(what, path, std::string("not a JSON object of token -> id (") +
                              simdjson::error_message(code) + ")");
  };
  // The DOM parser validates the whole document, trailing content included, as json.load does.
  if (auto code = parser.parse(json).get(root)) bad(code);
  if (auto code = root.get_object().get(object)) bad(code);
  std::vector<VocabEntry> entries;
  std::unordered_map<std::string, std::size_t> index;
  for (auto [key, value] : object) {
    std::int64_t id = 0;
    if (value.get_int64().get(id) != simdjson::SUCCESS)
      fail_file(what, path, "the id of token " + json_quote(key) + " is not an integer");
    if (id < 0 || id >= (std::int64_t{1} << 26))
      fail_file(what, path, "the id of token " + json_quote(key) + ", " + std::to_string(id) +
                                ", is outside [0, 2^26)");
    auto [it, inserted] = index.emplace(std::string(key), entries.size());
    if (inserted) entries.push_back({std::string(key), static_cast<TokenId>(id)});
    else entries[it->second].id = static_cast<TokenId>(id);
  }
  if (entries.empty()) fail_file(what, path, "the vocabulary is empty");
  return entries;
}

void read_merges(const std::string& path, const MergeLineFn& fn) {
  constexpr const char* what = "GPT-2 merges file";
  MappedFile file = [&] {
    try {
      return MappedFile(path);
    } catch (const Error& e) {
      throw Error(std::string(what) + ": " + e.what());
    }
  }();
  std::string_view text = file.view();
  if (auto bad = utf8::find_invalid(text))
    fail_file(what, path, "invalid UTF-8 at byte " + std::to_string(*bad));
  std::size_t line_number = 0;
  std::size_t pos = 0;
  while (true) {
    std::size_t eol = text.find_first_of("\r\n", pos);
    if (eol == std::string_view::npos) break;  // the last segment is dropped by [1:-1]
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + ((text[eol] == '\r' && eol + 1 < text.size() && text[eol + 1] == '\n') ? 2 : 1);
    if (line_number++ == 0) continue;
    std::string_view fields[3];
    int count = 0;
    std::size_t i = 0;
    while (i < line.size() && count < 3) {
      std::size_t field_start = i;
      std::size_t next = i;
      char32_t cp = utf8::decode_next(line, next);
      if (python_isspace(cp)) {
        i = next;
        continue;
      }
      while (i < line.size()) {
        next = i;
        cp = utf8::decode_next(line, next);
        if (python_isspace(cp)) break;
        i = next;
      }
      fields[count++] = line.substr(field_start, i - field_start);
    }
    if (count == 2) fn(static_cast<std::uint32_t>(line_number - 2), fields[0], fields[1]);
  }
}

}  // namespace mgt::gpt2
