#include "tokenizer/sentencepiece_bpe_encoder.hpp"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "tokenizer/utf8_validation.hpp"

namespace mgt {

namespace {

using PieceType = SentencePieceModelProto::PieceType;

constexpr std::string_view kSpace = kSentencePieceSpace;

bool is_space_symbol(const char* p) { return std::string_view(p, 3) == kSpace; }

// The number of code points of a piece (its bytes need not be valid UTF-8).
std::size_t code_points(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Heap order of the library's bpe::Model agenda: the highest score first, then the leftmost.
bool lower_priority(const auto& a, const auto& b) {
  return a.score < b.score || (a.score == b.score && a.left > b.left);
}

}  // namespace

std::shared_ptr<const SentencePieceBpeTables> SentencePieceBpeTables::build(const SentencePieceModelProto& m,
                                                                            std::string* why_not) {
  auto refuse = [&](const std::string& why) {
    if (why_not) *why_not = why;
    return nullptr;
  };
  if (m.model_type != 2) return refuse("not a BPE model");
  if (!m.precompiled_charsmap.empty()) return refuse("the normalizer maps characters");
  if (!m.escape_whitespaces) return refuse("spaces are not escaped");
  if (m.remove_extra_whitespaces) return refuse("the normalizer removes extra whitespace");
  if (m.treat_whitespace_as_suffix) return refuse("whitespace is a suffix");

  auto t = std::make_shared<SentencePieceBpeTables>();
  t->add_dummy_prefix = m.add_dummy_prefix;
  t->byte_fallback = m.byte_fallback;
  t->words_are_independent = true;

  // The library's PieceToId looks among control, unknown and byte pieces first, then among the
  // pieces it merges into; the encoder below only looks among the latter, so the two sets must
  // not share a string, and no reserved piece may be one character (which an unknown character
  // would otherwise turn into).
  std::unordered_map<std::string_view, TokenId> reserved, normal;
  int unknowns = 0;
  for (std::size_t i = 0; i < m.pieces.size(); ++i) {
    const auto& p = m.pieces[i];
    const auto id = static_cast<TokenId>(i);
    if (p.text.empty()) return refuse("a piece is empty");
    switch (p.type) {
      case PieceType::kNormal:
        if (!normal.emplace(p.text, id).second) return refuse("a piece is listed twice");
        if (!sentencepiece_space_only_leading(p.text)) t->words_are_independent = false;
        break;
      case PieceType::kUnknown:
        ++unknowns;
        t->unk_id = id;
        [[fallthrough]];
      case PieceType::kControl:
      case PieceType::kByte:
        if (code_points(p.text) == 1) return refuse("a reserved piece is a single character");
        if (!reserved.emplace(p.text, id).second) return refuse("a piece is listed twice");
        break;
      case PieceType::kUserDefined: return refuse("the model has user-defined pieces");
      case PieceType::kUnused: return refuse("the model has unused pieces");
      default: return refuse("a piece has an unknown type");
    }
  }
  if (unknowns != 1) return refuse("the model has no single unknown piece");
  for (const auto& [text, id] : reserved)
    if (normal.count(text)) return refuse("a reserved piece is also a normal piece");

  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const auto r = reserved.find(name);
    const auto n = normal.find(name);
    if (m.byte_fallback && r == reserved.end()) return refuse("byte fallback without every byte piece");
    t->byte_ids[b] = r != reserved.end() ? r->second : n != normal.end() ? n->second : t->unk_id;
  }

  std::size_t slots = 16;
  while (slots < 2 * normal.size()) slots *= 2;
  t->slots_.assign(slots, Slot{});
  t->mask_ = slots - 1;
  for (const auto& [text, id] : normal) {
    Slot s;
    s.head = gpt2::piece_head(text.data(), text.size());
    s.offset = static_cast<std::uint32_t>(t->bytes_.size());
    s.len = static_cast<std::uint32_t>(text.size());
    s.found = Found{id, m.pieces[static_cast<std::size_t>(id)].score};
    t->bytes_.append(text);
    std::size_t i = gpt2::hash_piece(text.data(), text.size(), s.head) & t->mask_;
    while (t->slots_[i].len != 0) i = (i + 1) & t->mask_;
    t->slots_[i] = s;
  }
  return t;
}

const SentencePieceBpeTables::Found* SentencePieceBpeTables::find(const char* p, std::size_t n) const {
  const std::uint64_t head = gpt2::piece_head(p, n);
  for (std::size_t i = gpt2::hash_piece(p, n, head) & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.len == 0) return nullptr;
    if (s.head != head || s.len != n) continue;
    if (n <= 8 || gpt2::same_long_bytes(bytes_.data() + s.offset, p, n)) return &s.found;
  }
}

bool SentencePieceBpeEncoder::encode(std::string_view text, std::vector<TokenId>& out) {
  // The library's normalizer gives nothing for an empty text (no dummy prefix either).
  if (text.empty()) return true;
  // Symbols hold 32-bit offsets; a text near 4 GiB (never a real document) stays with the library.
  if (text.size() > (std::size_t{1} << 30)) return false;
  if (!valid_utf8(text)) return false;
  const SentencePieceBpeTables& t = *tables_;
  normalized_.clear();
  if (t.add_dummy_prefix) normalized_.append(kSpace);
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t space = text.find(' ', i);
    const std::size_t end = space == std::string_view::npos ? text.size() : space;
    normalized_.append(text.data() + i, end - i);
    if (end == text.size()) break;
    normalized_.append(kSpace);
    i = end + 1;
  }
  const std::size_t first = out.size();
  const std::string_view s = normalized_;
  if (!t.words_are_independent) merge(s, out);
  else encode_words(s, out);
  // Without byte fallback the library reports a run of unknown symbols as one unknown piece.
  if (!t.byte_fallback) {
    auto last = std::unique(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
                            [&](TokenId a, TokenId b) { return a == t.unk_id && b == t.unk_id; });
    out.erase(last, out.end());
  }
  return true;
}

void SentencePieceBpeEncoder::encode_words(std::string_view s, std::vector<TokenId>& out) {
  // Cut before every run of U+2581: no piece spans such a cut, so each word merges alone.
  std::size_t start = 0;
  for (std::size_t i = 1; i + 3 <= s.size(); ++i) {
    if (s[i] != kSpace[0] || !is_space_symbol(s.data() + i)) continue;
    if (i >= 3 && is_space_symbol(s.data() + i - 3)) continue;
    encode_word(s.substr(start, i - start), out);
    start = i;
    i += 2;
  }
  encode_word(s.substr(start), out);
}

void SentencePieceBpeEncoder::encode_word(std::string_view word, std::vector<TokenId>& out) {
  if (word.size() > gpt2::PieceCache::kMaxPieceBytes) {
    merge(word, out);
    return;
  }
  const std::uint64_t head = gpt2::piece_head(word.data(), word.size());
  const std::uint64_t hash = gpt2::hash_piece(word.data(), word.size(), head);
  if (cache_.append_cached(word, head, hash, out)) return;
  word_ids_.clear();
  merge(word, word_ids_);
  cache_.insert(word, head, hash, word_ids_);
  out.insert(out.end(), word_ids_.begin(), word_ids_.end());
}

// bpe::Model::SampleEncode without sampling: start from single characters, repeatedly merge the
// adjacent pair whose concatenation is the best-scoring piece (the leftmost on a tie).
void SentencePieceBpeEncoder::merge(std::string_view word, std::vector<TokenId>& out) {
  const SentencePieceBpeTables& t = *tables_;
  symbols_.clear();
  heap_.clear();
  for (std::uint32_t i = 0; i < word.size();) {
    const std::uint32_t n = static_cast<std::uint32_t>(utf8_char_length(static_cast<unsigned char>(word[i])));
    const int index = static_cast<int>(symbols_.size());
    symbols_.push_back(Symbol{i, n, index - 1, i + n < word.size() ? index + 1 : -1});
    i += n;
  }
  if (symbols_.empty()) return;
  auto candidate = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::uint32_t len = symbols_[left].len + symbols_[right].len;
    const auto* found = t.find(word.data() + symbols_[left].begin, len);
    if (!found) return;
    heap_.push_back(Candidate{found->score, left, len});
    std::push_heap(heap_.begin(), heap_.end(), lower_priority<Candidate, Candidate>);
  };
  for (int i = 1; i < static_cast<int>(symbols_.size()); ++i) candidate(i - 1, i);
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), lower_priority<Candidate, Candidate>);
    const Candidate top = heap_.back();
    heap_.pop_back();
    Symbol& left = symbols_[top.left];
    // Stale when the left symbol was absorbed, or either side grew since the pair was pushed.
    if (left.len == 0 || left.next < 0 || left.len + symbols_[left.next].len != top.len) continue;
    Symbol& right = symbols_[left.next];
    left.len = top.len;
    left.next = right.next;
    if (right.next >= 0) symbols_[right.next].prev = top.left;
    right.len = 0;
    candidate(left.prev, top.left);
    candidate(top.left, left.next);
  }
  for (int i = 0; i >= 0; i = symbols_[i].next) {
    const Symbol& s = symbols_[i];
    if (const auto* found = t.find(word.data() + s.begin, s.len)) {
      out.push_back(found->id);
    } else if (t.byte_fallback) {
      for (std::uint32_t b = 0; b < s.len; ++b) out.push_back(t.byte_ids[static_cast<unsigned char>(word[s.begin + b])]);
    } else {
      out.push_back(t.unk_id);
    }
  }
}

}  // namespace mgt
