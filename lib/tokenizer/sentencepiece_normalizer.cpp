#include "tokenizer/sentencepiece_normalizer.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/error.hpp"
#include "tokenizer/utf8_validation.hpp"

namespace mgt {

namespace {

constexpr std::string_view kSpace = kSentencePieceSpace;
// The library keeps at most this many prefix matches of the map per position (kMaxTrieResultsSize).
constexpr std::size_t kMaxMatches = 32;

// darts-clone's DoubleArrayUnit.
bool has_leaf(std::uint32_t unit) { return ((unit >> 8) & 1) == 1; }
std::uint32_t value_of(std::uint32_t unit) { return unit & ((1U << 31) - 1); }
std::uint32_t label_of(std::uint32_t unit) { return unit & ((1U << 31) | 0xFF); }
std::uint32_t offset_of(std::uint32_t unit) { return (unit >> 10) << ((unit & (1U << 9)) >> 6); }

}  // namespace

std::shared_ptr<const SentencePieceNormalizer> SentencePieceNormalizer::build(const SentencePieceModelProto& model,
                                                                              std::string* why_not) {
  auto refuse = [&](const char* why) {
    if (why_not) *why_not = why;
    return nullptr;
  };
  if (model.treat_whitespace_as_suffix) return refuse("treat_whitespace_as_suffix");
  for (const auto& piece : model.pieces)
    if (piece.type == SentencePieceModelProto::PieceType::kUserDefined)
      return refuse("user-defined pieces (the normalizer matches them first)");
  auto n = std::make_shared<SentencePieceNormalizer>();
  n->add_dummy_prefix_ = model.add_dummy_prefix;
  n->remove_extra_whitespaces_ = model.remove_extra_whitespaces;
  n->escape_whitespaces_ = model.escape_whitespaces;
  // normalizer.cc DecodePrecompiledCharsMap: <trie size, 4 bytes little-endian><trie><strings>.
  const std::string& blob = model.precompiled_charsmap;
  if (!blob.empty()) {
    if (blob.size() < 4) throw Error("SentencePiece precompiled_charsmap is truncated");
    const auto* b = reinterpret_cast<const unsigned char*>(blob.data());
    const std::uint32_t trie_bytes = b[0] | (b[1] << 8) | (b[2] << 16) | (std::uint32_t{b[3]} << 24);
    if (trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > blob.size() - 4)
      throw Error("SentencePiece precompiled_charsmap has a trie of " + std::to_string(trie_bytes) +
                  " bytes in " + std::to_string(blob.size()));
    n->trie_.resize(trie_bytes / 4);
    for (std::size_t i = 0; i < n->trie_.size(); ++i) {
      const unsigned char* u = b + 4 + 4 * i;
      n->trie_[i] = u[0] | (u[1] << 8) | (u[2] << 16) | (std::uint32_t{u[3]} << 24);
    }
    n->replacements_ = blob.substr(4 + trie_bytes);
    // Which bytes begin a rule: the root's child for that label exists.
    const std::uint32_t root = offset_of(n->trie_[0]);
    for (unsigned c = 0; c < 256; ++c) {
      const std::size_t pos = root ^ c;
      n->starts_rule_[c] = pos < n->trie_.size() && label_of(n->trie_[pos]) == c;
    }
  }
  for (unsigned c = 0; c < 128; ++c) {
    bool plain = true;
    std::string_view unused;
    const char alone[1] = {static_cast<char>(c)};
    if (n->starts_rule_[c] && n->longest_rule(std::string_view(alone, 1), unused) > 0) plain = false;
    for (unsigned d = 0; plain && n->starts_rule_[c] && d < 128; ++d) {
      const char pair[2] = {static_cast<char>(c), static_cast<char>(d)};
      if (n->longest_rule(std::string_view(pair, 2), unused) > 0) plain = false;
    }
    n->copied_whole_[c] = plain && c != ' ';
    if (c == ' ') n->plain_space_ = plain;
  }
  n->printable_copied_ = std::all_of(n->copied_whole_ + 0x21, n->copied_whole_ + 0x7F, [](bool b) { return b; });
  return n;
}

std::size_t SentencePieceNormalizer::longest_rule(std::string_view text, std::string_view& replacement) const {
  // Darts::DoubleArray::commonPrefixSearch, keeping the longest of the first kMaxMatches matches.
  std::size_t node = offset_of(trie_[0]);
  std::size_t longest = 0, matches = 0;
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    node ^= c;
    if (node >= trie_.size()) break;
    const std::uint32_t unit = trie_[node];
    if (label_of(unit) != c) break;
    node ^= offset_of(unit);
    if (node >= trie_.size()) break;
    if (has_leaf(unit)) {
      if (matches < kMaxMatches) {
        longest = i + 1;
        value = value_of(trie_[node]);
      }
      ++matches;
    }
  }
  if (longest == 0) return 0;
  if (value >= replacements_.size()) throw Error("SentencePiece precompiled_charsmap points past its strings");
  replacement = std::string_view(replacements_.data() + value);
  return longest;
}

std::size_t SentencePieceNormalizer::copied_run(std::string_view text) const {
  std::size_t run = 0;
#if defined(__SSE2__)
  if (printable_copied_) {
    // Sixteen bytes at a time while they are all in 0x21..0x7E (compared as signed bytes, where
    // the bytes from 0x80 on are negative); the byte that stops it is left to the table below.
    const __m128i above_space = _mm_set1_epi8(0x20);
    const __m128i below_delete = _mm_set1_epi8(0x7F);
    while (run + 16 <= text.size()) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + run));
      const __m128i printable = _mm_and_si128(_mm_cmpgt_epi8(v, above_space), _mm_cmplt_epi8(v, below_delete));
      const auto mask = static_cast<unsigned>(_mm_movemask_epi8(printable));
      if (mask != 0xFFFFu) {
        run += static_cast<std::size_t>(std::countr_one(mask));
        break;
      }
      run += 16;
    }
  }
#endif
  while (run < text.size() && copied_whole_[static_cast<unsigned char>(text[run])]) ++run;
  return run;
}

bool SentencePieceNormalizer::normalize(std::string_view text, std::string& out,
                                        std::vector<std::int32_t>* spaces) const {
  out.clear();
  if (spaces) spaces->clear();
  // Every U+2581 from `from` on in `out`, into `spaces`.
  const auto note_spaces_from = [&](std::size_t from) {
    if (!spaces) return;
    for (std::size_t i = out.find(kSpace, from); i != std::string::npos; i = out.find(kSpace, i + kSpace.size()))
      spaces->push_back(static_cast<std::int32_t>(i));
  };
  const auto* end = reinterpret_cast<const unsigned char*>(text.data() + text.size());
  // One normalized piece of the input at a time: a rule's replacement, or the character itself.
  auto next = [&](std::string_view& piece) -> std::size_t {
    const auto c = static_cast<unsigned char>(text[0]);
    if (starts_rule_[c]) {
      const std::size_t n = longest_rule(text, piece);
      if (n > 0) return n;
    }
    const std::size_t n = utf8_length(reinterpret_cast<const unsigned char*>(text.data()), end);
    piece = text.substr(0, n);
    return n;
  };
  std::string_view piece;
  // Leading whitespace (after normalization) is dropped.
  if (remove_extra_whitespaces_) {
    while (!text.empty()) {
      const std::size_t n = next(piece);
      if (n == 0) return false;
      if (piece != " ") break;
      text.remove_prefix(n);
    }
  }
  if (text.empty()) return true;
  const std::string_view space = escape_whitespaces_ ? kSpace : std::string_view(" ");
  if (add_dummy_prefix_) {
    if (spaces && escape_whitespaces_) spaces->push_back(0);
    out.append(space);
  }
  bool previous_space = remove_extra_whitespaces_;
  while (!text.empty()) {
    // A run of plain ASCII bytes other than spaces, each before another ASCII byte: copied whole.
    std::size_t run = copied_run(text);
    // The last byte may begin a rule with the non-ASCII byte after it.
    if (run > 0 && run < text.size() && static_cast<unsigned char>(text[run]) >= 0x80) --run;
    if (run > 0) {
      out.append(text.data(), run);
      previous_space = false;
      text.remove_prefix(run);
      continue;
    }
    // A space no rule maps: the escaped space, once per run where extra whitespace is removed
    // (what the general path below does with it, without the rule lookup).
    if (text[0] == ' ' && plain_space_ && (text.size() == 1 || static_cast<unsigned char>(text[1]) < 0x80)) {
      if (!previous_space) {
        if (spaces && escape_whitespaces_) spaces->push_back(static_cast<std::int32_t>(out.size()));
        out.append(space);
      }
      previous_space = remove_extra_whitespaces_;
      text.remove_prefix(1);
      continue;
    }
    const std::size_t n = next(piece);
    if (n == 0) return false;  // not UTF-8: the library replaces it itself
    std::string_view sp = piece;
    while (previous_space && !sp.empty() && sp[0] == ' ') sp.remove_prefix(1);
    if (!sp.empty()) {
      const std::size_t from = out.size();
      for (char ch : sp) {
        if (ch == ' ') out.append(space);
        else out.push_back(ch);
      }
      note_spaces_from(from);
      previous_space = sp.back() == ' ';
    }
    text.remove_prefix(n);
    if (!remove_extra_whitespaces_) previous_space = false;
  }
  if (remove_extra_whitespaces_)
    while (out.size() >= space.size() && std::string_view(out).substr(out.size() - space.size()) == space)
      out.resize(out.size() - space.size());
  if (spaces)
    while (!spaces->empty() && static_cast<std::size_t>(spaces->back()) >= out.size()) spaces->pop_back();
  return true;
}

}  // namespace mgt
