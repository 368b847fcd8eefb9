#include "tokenizer/split_pretokenizer.hpp"

#include <unicode/regex.h>
#include <unicode/unistr.h>

#include <cstdint>

#include "core/error.hpp"
#include "core/utf8.hpp"
#include "tokenizer/gpt2_pretokenizer.hpp"

namespace mgt {

using gpt2::char_at;
using gpt2::CharInfo;
using gpt2::run_end;
using unicode::PretokenClass;
using unicode::PretokenClasses;

std::optional<KnownSplitPattern> recognize_split_pattern(std::string_view pattern) {
  if (pattern == R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)")
    return KnownSplitPattern{KnownSplitPattern::Kind::kGpt2, {}};
  // Every spelling of the Llama 3 family that these pieces make matches the same way: the
  // possessive forms never need to backtrack, and \s*[\r\n] ends where \s*[\r\n]+ does (after
  // the last line break of the whitespace run).
  struct Part {
    std::string_view text;
    int value;
  };
  const Part contractions[] = {{R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|)", 1}, {R"('(?i:[sdmt]|ll|ve|re)|)", 1}, {"", 0}};
  const Part letters[] = {{R"([^\r\n\p{L}\p{N}]?\p{L}+)", 0}, {R"([^\r\n\p{L}\p{N}]?+\p{L}+)", 0}};
  const Part digits[] = {{R"(|\p{N}{1,3}|)", 3}, {R"(|\p{N}|)", 1}, {R"(|\p{N}+|)", -1}};
  const Part others[] = {{R"( ?[^\s\p{L}\p{N}]+[\r\n]*|)", 0}, {R"( ?[^\s\p{L}\p{N}]++[\r\n]*|)", 0}};
  const Part breaks[] = {{R"(\s*[\r\n]+|)", 0}, {R"(\s*[\r\n]|)", 0}};
  constexpr std::string_view tail = R"(\s+(?!\S)|\s+)";
  for (const Part& c : contractions)
    for (const Part& l : letters)
      for (const Part& d : digits)
        for (const Part& o : others)
          for (const Part& b : breaks) {
            std::string spelled;
            spelled.append(c.text).append(l.text).append(d.text).append(o.text).append(b.text).append(tail);
            if (spelled != pattern) continue;
            KnownSplitPattern known{KnownSplitPattern::Kind::kLlama, {}};
            known.llama.contractions = c.value != 0;
            known.llama.max_digits = d.value < 0 ? SIZE_MAX : static_cast<std::size_t>(d.value);
            return known;
          }
  return std::nullopt;
}

namespace {

bool is_break(char c) { return c == '\r' || c == '\n'; }

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at text[pos] == '\'': its length, or 0. Case folding also makes
// U+017F LATIN SMALL LETTER LONG S an 's'.
std::size_t contraction_length_ci(std::string_view text, std::size_t pos) {
  const std::size_t n = text.size();
  if (pos + 1 >= n) return 0;
  auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
  const char c1 = lower(text[pos + 1]);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (text.substr(pos + 1, 2) == "\xC5\xBF") return 3;
  if (pos + 2 >= n) return 0;
  const char c2 = lower(text[pos + 2]);
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

}  // namespace

void for_each_llama_piece(std::string_view text, const LlamaSplitPattern& pattern,
                          const std::function<void(std::string_view)>& emit) {
  const PretokenClasses& classes = PretokenClasses::instance();
  const std::size_t n = text.size();
  std::size_t pos = 0;
  auto take = [&](std::size_t end) {
    emit(text.substr(pos, end - pos));
    pos = end;
  };
  auto skip_breaks = [&](std::size_t end) {
    while (end < n && is_break(text[end])) ++end;
    return end;
  };
  while (pos < n) {
    const char b = text[pos];
    if (pattern.contractions && b == '\'') {
      if (std::size_t len = contraction_length_ci(text, pos)) {
        take(pos + len);
        continue;
      }
    }
    const CharInfo c = char_at(text, pos, classes);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (c.cls == PretokenClass::kLetter) {
      take(run_end(text, pos + c.len, PretokenClass::kLetter, classes));
      continue;
    }
    if (c.cls != PretokenClass::kNumber && !is_break(b) && pos + c.len < n) {
      const CharInfo d = char_at(text, pos + c.len, classes);
      if (d.cls == PretokenClass::kLetter) {
        take(run_end(text, pos + c.len + d.len, PretokenClass::kLetter, classes));
        continue;
      }
    }
    // \p{N}{1,D}
    if (c.cls == PretokenClass::kNumber) {
      std::size_t end = pos + c.len;
      for (std::size_t count = 1; count < pattern.max_digits && end < n; ++count) {
        const CharInfo d = char_at(text, end, classes);
        if (d.cls != PretokenClass::kNumber) break;
        end += d.len;
      }
      take(end);
      continue;
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    if (b == ' ' && pos + 1 < n) {
      const CharInfo d = char_at(text, pos + 1, classes);
      if (d.cls == PretokenClass::kOther) {
        take(skip_breaks(run_end(text, pos + 1 + d.len, PretokenClass::kOther, classes)));
        continue;
      }
    }
    if (c.cls == PretokenClass::kOther) {
      take(skip_breaks(run_end(text, pos + c.len, PretokenClass::kOther, classes)));
      continue;
    }
    // A whitespace run: \s*[\r\n]+ ends after its last line break; otherwise \s+(?!\S) leaves
    // the last character to the next piece when a non-space follows, unless the run is one
    // character long, which \s+ then takes.
    std::size_t end = pos + c.len;
    std::size_t last = pos;
    std::size_t after_break = is_break(b) ? end : 0;
    while (end < n) {
      const CharInfo e = char_at(text, end, classes);
      if (e.cls != PretokenClass::kSpace) break;
      last = end;
      end += e.len;
      if (is_break(text[last])) after_break = end;
    }
    if (after_break != 0) take(after_break);
    else if (end < n && last > pos) take(last);
    else take(end);
  }
}

// ----------------------------------------------------------------------------------------------
// ICU

struct IcuSplitRegex::Impl {
  std::unique_ptr<icu::RegexPattern> pattern;
};

namespace {

// \s and \S as Unicode White_Space; ICU's own \s leaves out \v and U+0085.
std::string with_white_space_classes(std::string_view pattern) {
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[i + 1];
      if (next == 's') out += "\\p{White_Space}";
      else if (next == 'S') out += "\\P{White_Space}";
      else out.append(pattern.substr(i, 2));
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

}  // namespace

IcuSplitRegex::IcuSplitRegex(std::string_view pattern, const std::string& what) : impl_(std::make_unique<Impl>()) {
  UErrorCode status = U_ZERO_ERROR;
  UParseError parse_error;
  const std::string rewritten = with_white_space_classes(pattern);
  impl_->pattern.reset(icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(rewritten), parse_error, status));
  if (U_FAILURE(status))
    throw Error(what + ": ICU cannot compile the regex '" + std::string(pattern) + "' (" + u_errorName(status) + ")");
}

IcuSplitRegex::~IcuSplitRegex() = default;

struct IcuSplitRegex::Matcher::Impl {
  std::unique_ptr<icu::RegexMatcher> matcher;
  icu::UnicodeString text16;
  std::vector<std::size_t> offset;  // UTF-16 index -> byte offset
};

IcuSplitRegex::Matcher::Matcher(const IcuSplitRegex& regex) : impl_(std::make_unique<Impl>()) {
  UErrorCode status = U_ZERO_ERROR;
  impl_->matcher.reset(regex.impl_->pattern->matcher(status));
  if (U_FAILURE(status)) throw Error(std::string("ICU cannot make a regex matcher: ") + u_errorName(status));
}

IcuSplitRegex::Matcher::~Matcher() = default;

void IcuSplitRegex::Matcher::split(std::string_view text,
                                   const std::function<void(std::size_t, std::size_t, bool)>& emit) {
  Impl& m = *impl_;
  m.offset.clear();
  // Written into the string's own buffer: appending one code point at a time through
  // UnicodeString::append was a sixth of the time with the TikToken v2 pattern. The units are
  // what append(UChar32) writes (U16_APPEND: one unit up to U+FFFF, a pair above, none past
  // U+10FFFF).
  if (text.size() >= static_cast<std::size_t>(INT32_MAX)) throw Error("ICU regex: a text of 2 GiB or more");
  const auto capacity = static_cast<std::int32_t>(text.size()) + 1;  // at most one unit per byte
  UChar* units = m.text16.getBuffer(capacity);
  if (units == nullptr) throw Error("ICU regex: cannot allocate the UTF-16 text");
  std::int32_t length = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t start = pos;
    char32_t cp = utf8::decode_next(text, pos);
    if (cp == utf8::kInvalid) cp = 0xFFFD;
    m.offset.push_back(start);
    if (cp <= 0xFFFF) {
      units[length++] = static_cast<UChar>(cp);
    } else if (cp <= 0x10FFFF) {
      units[length++] = U16_LEAD(cp);
      units[length++] = U16_TRAIL(cp);
      m.offset.push_back(start);
    }
  }
  m.text16.releaseBuffer(length);
  m.offset.push_back(text.size());
  UErrorCode status = U_ZERO_ERROR;
  m.matcher->reset(m.text16);
  std::size_t done = 0;
  while (m.matcher->find(status) && U_SUCCESS(status)) {
    const auto begin = static_cast<std::size_t>(m.matcher->start(status));
    const auto end = static_cast<std::size_t>(m.matcher->end(status));
    if (end == begin) continue;
    if (begin > done) emit(m.offset[done], m.offset[begin], false);
    emit(m.offset[begin], m.offset[end], true);
    done = end;
  }
  if (U_FAILURE(status)) throw Error(std::string("ICU regex matching failed: ") + u_errorName(status));
  if (done < static_cast<std::size_t>(m.text16.length())) emit(m.offset[done], text.size(), false);
}

}  // namespace mgt
