// HuggingFaceTokenizer's encoding: tokenizers' TokenizerImpl::encode for one sequence
// (tokenizer/mod.rs): added tokens split out (added_vocabulary.rs find_matches), the normalizer,
// the pre-tokenizer steps, BPE per piece, then the post-processor's template.
#include "tokenizer/hf_tokenizer.hpp"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>

#include <algorithm>
#include <array>
#include <cctype>

#include "core/error.hpp"
#include "core/utf8.hpp"
#include "tokenizer/gpt2_pretokenizer.hpp"
#include "tokenizer/gpt2_vocab_files.hpp"
#include "tokenizer/hf_tokenizer_tables.hpp"
#include "tokenizer/utf8_lossy.hpp"

namespace mgt {
namespace {

using unicode::PretokenClass;
using unicode::PretokenClasses;

// Leftmost-longest matching of added tokens, as tokenizers' Aho-Corasick automaton
// (MatchKind::LeftmostLongest) finds them.
class AddedTokenMatcher {
public:
  explicit AddedTokenMatcher(const std::vector<HfAddedToken>& tokens) : tokens_(tokens) {
    for (std::size_t i = 0; i < tokens.size(); ++i)
      by_first_[static_cast<unsigned char>(tokens[i].content[0])].push_back(i);
    for (auto& list : by_first_)
      std::stable_sort(list.begin(), list.end(), [&](std::size_t a, std::size_t b) {
        return tokens[a].content.size() > tokens[b].content.size();
      });
  }
  bool empty() const { return tokens_.empty(); }

  // The first match at or after `from`: (begin, token index), or begin == npos.
  std::pair<std::size_t, std::size_t> find(std::string_view text, std::size_t from) const {
    for (std::size_t i = from; i < text.size(); ++i) {
      for (std::size_t k : by_first_[static_cast<unsigned char>(text[i])]) {
        const std::string& c = tokens_[k].content;
        if (text.compare(i, c.size(), c) == 0) return {i, k};
      }
    }
    return {std::string_view::npos, 0};
  }
  const HfAddedToken& token(std::size_t k) const { return tokens_[k]; }

private:
  const std::vector<HfAddedToken>& tokens_;
  std::array<std::vector<std::size_t>, 256> by_first_;
};

char32_t last_char(std::string_view s) {
  std::size_t start = s.size();
  while (start > 0 && (static_cast<unsigned char>(s[start - 1]) & 0xC0) == 0x80) --start;
  if (start > 0) --start;
  std::size_t pos = start;
  return utf8::decode_next(s, pos);
}

bool is_white_space(char32_t cp) {
  return cp < 0x110000 && PretokenClasses::instance().of(cp) == PretokenClass::kSpace;
}

// Rust's char::is_alphanumeric: Alphabetic or a number (N*).
bool is_alphanumeric(char32_t cp) {
  if (cp >= 0x110000) return false;
  const auto c = static_cast<UChar32>(cp);
  return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || (U_GET_GC_MASK(c) & U_GC_N_MASK) != 0;
}

// find_matches: calls on_text(range) for the text between matches and on_token(id) for each
// match, with single_word, lstrip and rstrip applied.
template <class OnText, class OnToken>
void split_added(std::string_view text, const AddedTokenMatcher& matcher, OnText&& on_text, OnToken&& on_token) {
  if (matcher.empty() || text.empty()) {
    on_text(text);
    return;
  }
  std::size_t done = 0;   // start_offset
  std::size_t search = 0;
  while (true) {
    auto [begin, k] = matcher.find(text, search);
    if (begin == std::string_view::npos) break;
    const HfAddedToken& tok = matcher.token(k);
    std::size_t start = begin;
    std::size_t stop = begin + tok.content.size();
    search = stop;
    if (tok.single_word) {
      const bool start_space = start == 0 || !is_alphanumeric(last_char(text.substr(0, start)));
      std::size_t p = stop;
      const bool stop_space = stop == text.size() || !is_alphanumeric(utf8::decode_next(text, p));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) {
      std::size_t s = start;
      while (s > 0) {
        std::string_view before = text.substr(0, s);
        const char32_t cp = last_char(before);
        if (!is_white_space(cp)) break;
        std::size_t len = 1;
        while (len < s && (static_cast<unsigned char>(text[s - len]) & 0xC0) == 0x80) ++len;
        s -= len;
      }
      start = std::max(s, done);
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        std::size_t p = stop;
        if (!is_white_space(utf8::decode_next(text, p))) break;
        stop = p;
      }
    }
    if (done < start) on_text(text.substr(done, start - done));
    on_token(tok.id);
    done = stop;
  }
  if (done < text.size()) on_text(text.substr(done));
}

// The ICU instance of a Unicode normalization form; nullptr for the string edits.
const icu::Normalizer2* normalizer_instance(const HfNormalizer& n) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* result = nullptr;
  switch (n.kind) {
    case HfNormalizer::Kind::kNfc: result = icu::Normalizer2::getNFCInstance(status); break;
    case HfNormalizer::Kind::kNfd: result = icu::Normalizer2::getNFDInstance(status); break;
    case HfNormalizer::Kind::kNfkc: result = icu::Normalizer2::getNFKCInstance(status); break;
    case HfNormalizer::Kind::kNfkd: result = icu::Normalizer2::getNFKDInstance(status); break;
    case HfNormalizer::Kind::kPrepend:
    case HfNormalizer::Kind::kReplace: return nullptr;
  }
  if (U_FAILURE(status) || !result) throw Error(std::string("ICU normalizer unavailable: ") + u_errorName(status));
  return result;
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  std::string result;
  std::size_t done = 0;
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, done)) {
    result.append(text, done, at - done).append(to);
    done = at + from.size();
  }
  if (done == 0) return;
  result.append(text, done, std::string::npos);
  text.swap(result);
}

// The decoders of a plain-string vocabulary over the tokens' strings (tokenizers' decode_chain
// of each), then joined.
std::string decode_plain(const std::vector<HfDecoderStep>& steps, std::vector<std::string> tokens) {
  for (const HfDecoderStep& step : steps) {
    switch (step.kind) {
      case HfDecoderStep::Kind::kReplace:
        for (std::string& token : tokens) replace_all(token, step.pattern, step.content);
        break;
      case HfDecoderStep::Kind::kByteFallback: {
        // Runs of <0xHH> tokens become their bytes when those are UTF-8, else one U+FFFD each.
        std::vector<std::string> result;
        std::string bytes;
        std::size_t run = 0;
        auto flush = [&] {
          if (run == 0) return;
          if (!utf8::find_invalid(bytes)) {
            result.push_back(bytes);
          } else {
            for (std::size_t i = 0; i < run; ++i) result.emplace_back("\xEF\xBF\xBD");
          }
          bytes.clear();
          run = 0;
        };
        for (std::string& token : tokens) {
          auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
          if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>' && hex(token[3]) && hex(token[4])) {
            bytes.push_back(static_cast<char>(std::stoi(token.substr(3, 2), nullptr, 16)));
            ++run;
          } else {
            flush();
            result.push_back(std::move(token));
          }
        }
        flush();
        tokens.swap(result);
        break;
      }
      case HfDecoderStep::Kind::kFuse: {
        std::string all;
        for (const std::string& token : tokens) all += token;
        tokens.assign(1, std::move(all));
        break;
      }
      case HfDecoderStep::Kind::kStrip:
        for (std::string& token : tokens) {
          std::size_t begin = 0, end = token.size();
          for (std::size_t i = 0; i < step.start && token.compare(begin, step.content.size(), step.content) == 0; ++i)
            begin += step.content.size();
          for (std::size_t i = 0; i < step.stop && end >= begin + step.content.size() &&
                                  token.compare(end - step.content.size(), step.content.size(), step.content) == 0;
               ++i)
            end -= step.content.size();
          token = token.substr(begin, end - begin);
        }
        break;
      case HfDecoderStep::Kind::kMetaspace:
        // The first token loses its replacements (the prepended one among them); the others
        // become spaces.
        for (std::size_t i = 0; i < tokens.size(); ++i)
          replace_all(tokens[i], step.content, i == 0 && step.strip_first ? "" : " ");
        break;
    }
  }
  std::string text;
  for (const std::string& token : tokens) text += token;
  return text;
}

}  // namespace

class HuggingFaceTokenizer::Workspace {
public:
  explicit Workspace(const Tables& t) : raw_(t.added_raw), normalized_(t.added_normalized) {
    for (const auto& step : t.pre_tokenizer)
      matchers_.push_back(step.icu ? std::make_unique<IcuSplitRegex::Matcher>(*step.icu) : nullptr);
    for (const HfNormalizer& n : t.normalizers) normalizers_.push_back(normalizer_instance(n));
  }

  void encode(const Tables& t, std::string_view text, std::vector<TokenId>& out) {
    out.insert(out.end(), t.prefix.begin(), t.prefix.end());
    // A piece starts the input when it is the first of both splits: Metaspace's "first"
    // prepend_scheme tests that (offsets_original().0 == 0).
    split_added(text, raw_, [&](std::string_view part) {
      const bool part_first = part.data() == text.data();
      if (normalizers_.empty()) {
        split_added(part, normalized_,
                    [&](std::string_view p) { run_steps(t, 0, p, part_first && p.data() == part.data(), out); },
                    [&](TokenId id) { out.push_back(id); });
        return;
      }
      // A buffer per call: the second split reads it while the steps run.
      std::string normalized = normalize(t, part);
      split_added(normalized, normalized_,
                  [&](std::string_view p) { run_steps(t, 0, p, part_first && p.data() == normalized.data(), out); },
                  [&](TokenId id) { out.push_back(id); });
    }, [&](TokenId id) { out.push_back(id); });
    out.insert(out.end(), t.suffix.begin(), t.suffix.end());
  }

  // Pre-tokenizer steps from `k` on; the last step's pieces go to BPE (or to `pieces`).
  void run_steps(const Tables& t, std::size_t k, std::string_view piece, bool at_start, std::vector<TokenId>& out,
                 std::vector<std::string>* pieces = nullptr) {
    if (k == t.pre_tokenizer.size()) {
      if (piece.empty()) return;
      if (pieces) pieces->emplace_back(piece);
      else bpe_.encode(t.bpe, piece, out);
      return;
    }
    const HfPreTokenizerStep& step = t.pre_tokenizer[k];
    // tokenizers drops the empty pieces a step makes.
    auto next = [&](std::string_view p) {
      if (!p.empty()) run_steps(t, k + 1, p, at_start && p.data() == piece.data(), out, pieces);
    };
    switch (step.kind) {
      case HfPreTokenizerStep::Kind::kByteLevel: {
        std::string prefixed;
        std::string_view p = piece;
        if (step.add_prefix_space && (p.empty() || p[0] != ' ')) {
          prefixed.reserve(p.size() + 1);
          prefixed.append(" ").append(p);
          p = prefixed;
        }
        if (step.use_regex) gpt2::for_each_piece(p, next);
        else next(p);
        return;
      }
      case HfPreTokenizerStep::Kind::kSplitGpt2:
        gpt2::for_each_piece(piece, next);
        return;
      case HfPreTokenizerStep::Kind::kSplitLlama:
        for_each_llama_piece(piece, step.llama, next);
        return;
      case HfPreTokenizerStep::Kind::kSplitIcu:
        matchers_[k]->split(piece, [&](std::size_t b, std::size_t e, bool) { next(piece.substr(b, e - b)); });
        return;
      case HfPreTokenizerStep::Kind::kSplitString: {
        std::size_t done = 0;
        for (std::size_t at = piece.find(step.literal); at != std::string_view::npos;
             at = piece.find(step.literal, done)) {
          next(piece.substr(done, at - done));
          next(piece.substr(at, step.literal.size()));
          done = at + step.literal.size();
        }
        next(piece.substr(done));
        return;
      }
      case HfPreTokenizerStep::Kind::kMetaspace: {
        if (piece.empty()) return;  // nothing to prepend to, as NormalizedString::prepend has it
        std::string replaced(piece);
        replace_all(replaced, " ", step.replacement);
        const bool starts = replaced.compare(0, step.replacement.size(), step.replacement) == 0;
        if (!starts && (step.prepend == HfPreTokenizerStep::Prepend::kAlways ||
                        (step.prepend == HfPreTokenizerStep::Prepend::kFirst && at_start)))
          replaced.insert(0, step.replacement);
        // The pieces below are views of `replaced`; the one at its start starts the input when
        // this piece did.
        auto sub = [&](std::string_view p) {
          if (!p.empty()) run_steps(t, k + 1, p, at_start && p.data() == replaced.data(), out, pieces);
        };
        if (!step.split) {
          sub(replaced);
          return;
        }
        // Split with MergedWithNext: each replacement starts a piece that runs to the next
        // replacement, except that one directly followed by another stands alone.
        const std::string_view r = step.replacement;
        const std::string_view all = replaced;
        std::size_t at = all.find(r);
        if (at == std::string_view::npos) {
          sub(all);
          return;
        }
        sub(all.substr(0, at));
        while (at != std::string_view::npos) {
          const std::size_t next_at = all.find(r, at + r.size());
          const std::size_t end = next_at == std::string_view::npos ? all.size() : next_at;
          sub(all.substr(at, end - at));
          at = next_at;
        }
        return;
      }
      case HfPreTokenizerStep::Kind::kDigits: {
        auto digit = [](char c) { return c >= '0' && c <= '9'; };
        std::size_t i = 0;
        while (i < piece.size()) {
          std::size_t j = i + 1;
          if (digit(piece[i])) {
            if (!step.individual_digits) while (j < piece.size() && digit(piece[j])) ++j;
          } else {
            while (j < piece.size() && !digit(piece[j])) ++j;
          }
          next(piece.substr(i, j - i));
          i = j;
        }
        return;
      }
    }
  }

  std::string normalize(const Tables& t, std::string_view text) {
    std::string current(text);
    for (std::size_t i = 0; i < normalizers_.size(); ++i) {
      const HfNormalizer& edit = t.normalizers[i];
      if (!normalizers_[i]) {
        if (edit.kind == HfNormalizer::Kind::kPrepend) {
          if (!current.empty()) current.insert(0, edit.content);
        } else {
          replace_all(current, edit.pattern, edit.content);
        }
        continue;
      }
      std::string result;
      icu::StringByteSink<std::string> sink(&result);
      UErrorCode status = U_ZERO_ERROR;
      normalizers_[i]->normalizeUTF8(0, icu::StringPiece(current.data(), static_cast<std::int32_t>(current.size())),
                                     sink, nullptr, status);
      if (U_FAILURE(status)) throw Error(std::string("Unicode normalization failed: ") + u_errorName(status));
      current.swap(result);
    }
    return current;
  }

  std::vector<std::string> pretokenize(const Tables& t, std::string_view text) {
    std::vector<std::string> pieces;
    std::vector<TokenId> unused;
    const std::string normalized = normalize(t, text);
    run_steps(t, 0, normalized, true, unused, &pieces);
    return pieces;
  }

private:
  AddedTokenMatcher raw_, normalized_;
  std::vector<std::unique_ptr<IcuSplitRegex::Matcher>> matchers_;
  std::vector<const icu::Normalizer2*> normalizers_;
  ByteBpeEncoder bpe_;
};

HuggingFaceTokenizer::HuggingFaceTokenizer(Private, std::shared_ptr<const Tables> tables)
    : tables_(std::move(tables)), work_(std::make_unique<Workspace>(*tables_)) {}

HuggingFaceTokenizer::~HuggingFaceTokenizer() = default;

std::unique_ptr<Tokenizer> HuggingFaceTokenizer::clone() const {
  return std::make_unique<HuggingFaceTokenizer>(Private{}, tables_);
}

void HuggingFaceTokenizer::tokenize(std::string_view text, std::vector<TokenId>& out) {
  work_->encode(*tables_, text, out);
}

std::vector<std::string> HuggingFaceTokenizer::pretokenize(std::string_view text) {
  return work_->pretokenize(*tables_, text);
}

std::int64_t HuggingFaceTokenizer::vocab_size() const { return tables_->vocab_size; }
TokenId HuggingFaceTokenizer::eod() const { return tables_->eos; }
std::optional<TokenId> HuggingFaceTokenizer::pad() const { return tables_->pad; }
std::optional<TokenId> HuggingFaceTokenizer::bos() const { return tables_->bos; }
std::vector<std::string> HuggingFaceTokenizer::tokenizer_paths() const { return {tables_->path}; }

// tokenizers' decode: runs of model tokens through the ByteLevel decoder (each token's
// characters mapped back to bytes, lossy UTF-8), added tokens as their text.
std::string HuggingFaceTokenizer::detokenize(std::span<const TokenId> ids) const {
  const Tables& t = *tables_;
  if (!t.byte_level) {
    // Plain-string vocabularies: every token, added ones too, through the decoders; without a
    // decoder tokenizers joins the tokens with spaces.
    std::vector<std::string> tokens;
    for (TokenId id : ids) {
      const auto i = static_cast<std::size_t>(id);
      if (id < 0 || i >= t.id_token.size() || !t.id_token[i])
        throw Error("HuggingFaceTokenizer: token id " + std::to_string(id) + " is not in the vocabulary of '" +
                    t.tokenizer_json + "'");
      tokens.push_back(*t.id_token[i]);
    }
    if (t.decoder) return utf8_lossy(decode_plain(*t.decoder, std::move(tokens)));
    std::string text;
    for (std::size_t i = 0; i < tokens.size(); ++i) text += (i ? " " : "") + tokens[i];
    return text;
  }
  std::string result;
  std::string chunk;
  std::string bytes;
  auto flush = [&] {
    result += utf8_lossy(chunk);
    chunk.clear();
  };
  for (TokenId id : ids) {
    const auto i = static_cast<std::size_t>(id);
    if (id < 0 || i >= t.id_token.size() || !t.id_token[i])
      throw Error("HuggingFaceTokenizer: token id " + std::to_string(id) + " is not in the vocabulary of '" +
                  t.tokenizer_json + "'");
    const std::string& token = *t.id_token[i];
    if (t.id_is_added[i]) {
      flush();
      result += token;
    } else if (gpt2::alphabet_to_bytes(token, bytes)) {
      chunk += bytes;
    } else {
      chunk += token;
    }
  }
  flush();
  return result;
}

}  // namespace mgt
