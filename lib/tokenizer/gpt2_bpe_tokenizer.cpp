#include "tokenizer/gpt2_bpe_tokenizer.hpp"

#include <simdjson.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <unordered_map>
#include <utility>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/mapped_file.hpp"
#include "core/utf8.hpp"
#include "tokenizer/unicode_class.hpp"

namespace mgt {
namespace {

using unicode::PretokenClass;
using unicode::PretokenClasses;

// ----------------------------------------------------------------------------------------------
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

// Maps a token written in the byte alphabet back to its bytes. False when a character lies
// outside the alphabet: such a token can never come out of BPE and cannot be decoded.
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

// ----------------------------------------------------------------------------------------------
// Pre-tokenizer: a hand-written matcher for
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with findall semantics. Every character is in exactly one of the classes letter, number,
// space, other, so at each position exactly one alternative wins and no backtracking is needed
// except the one-character give-back of \s+(?!\S).

constexpr std::array<PretokenClass, 128> make_ascii_classes() {
  std::array<PretokenClass, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) t[c] = PretokenClass::kLetter;
    else if (c >= '0' && c <= '9') t[c] = PretokenClass::kNumber;
    // \s in ASCII is \t \n \v \f \r and space; 0x1C-0x1F are not (unlike str.isspace()).
    else if ((c >= 0x09 && c <= 0x0D) || c == ' ') t[c] = PretokenClass::kSpace;
    else t[c] = PretokenClass::kOther;
  }
  return t;
}

constexpr std::array<PretokenClass, 128> kAsciiClass = make_ascii_classes();

struct CharInfo {
  PretokenClass cls;
  std::size_t len;
};

// Class and byte length of the character at text[pos]. A byte that does not start valid UTF-8
// counts as one "other" character, so malformed input is split but never rejected.
inline CharInfo char_at(std::string_view text, std::size_t pos, const PretokenClasses& classes) {
  auto b = static_cast<unsigned char>(text[pos]);
  if (b < 0x80) return {kAsciiClass[b], 1};
  std::size_t next = pos;
  char32_t cp = utf8::decode_next(text, next);
  if (cp == utf8::kInvalid) return {PretokenClass::kOther, 1};
  return {classes.of(cp), next - pos};
}

// End of the run of characters of class `cls` starting at pos.
inline std::size_t run_end(std::string_view text, std::size_t pos, PretokenClass cls,
                           const PretokenClasses& classes) {
  const std::size_t n = text.size();
  while (pos < n) {
    auto b = static_cast<unsigned char>(text[pos]);
    if (b < 0x80) {
      if (kAsciiClass[b] != cls) break;
      ++pos;
    } else {
      CharInfo c = char_at(text, pos, classes);
      if (c.cls != cls) break;
      pos += c.len;
    }
  }
  return pos;
}

// Length of a contraction ('s 't 're 've 'm 'll 'd, case-sensitive) at text[pos] == '\'', or 0.
inline std::size_t contraction_length(std::string_view text, std::size_t pos) {
  const std::size_t n = text.size();
  if (pos + 1 >= n) return 0;
  char c1 = text[pos + 1];
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (pos + 2 >= n) return 0;
  char c2 = text[pos + 2];
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

template <class Emit>
void for_each_piece(std::string_view text, Emit&& emit) {
  const PretokenClasses& classes = PretokenClasses::instance();
  const std::size_t n = text.size();
  std::size_t pos = 0;
  while (pos < n) {
    const std::size_t start = pos;
    const char b = text[pos];
    if (b == '\'') {
      if (std::size_t len = contraction_length(text, pos)) {
        emit(text.substr(start, len));
        pos += len;
        continue;
      }
    }
    CharInfo c = char_at(text, pos, classes);
    if (b == ' ' && pos + 1 < n) {
      // " ?X+": a single leading space joins a following letter, number or other run.
      CharInfo d = char_at(text, pos + 1, classes);
      if (d.cls != PretokenClass::kSpace) {
        pos = run_end(text, pos + 1 + d.len, d.cls, classes);
        emit(text.substr(start, pos - start));
        continue;
      }
    }
    if (c.cls != PretokenClass::kSpace) {
      pos = run_end(text, pos + c.len, c.cls, classes);
      emit(text.substr(start, pos - start));
      continue;
    }
    // A whitespace run. Followed by a non-space, \s+(?!\S) gives back its last character (which
    // then starts the next piece, joining it if it is a space), unless the run is one character
    // long, when \s+ takes it alone. At the end of the text the whole run is one piece.
    std::size_t last = pos;
    std::size_t end = pos + c.len;
    while (end < n) {
      CharInfo e = char_at(text, end, classes);
      if (e.cls != PretokenClass::kSpace) break;
      last = end;
      end += e.len;
    }
    if (end < n && last > start) end = last;
    emit(text.substr(start, end - start));
    pos = end;
  }
}

// ----------------------------------------------------------------------------------------------
// Merge table: (left symbol, right symbol) -> (rank, merged symbol), open addressing over the
// packed pair. Values pack rank in the high half so that comparing values compares ranks.

constexpr std::uint64_t kNoMerge = ~std::uint64_t{0};

class MergeTable {
public:
  void reserve(std::size_t count) {
    // Load factor up to 0.8: GPT-2's 50k merges then fit 1 MiB, which matters because every
    // cache miss of the piece cache probes this table a dozen times.
    std::size_t capacity = 16;
    while (capacity * 4 < count * 5) capacity *= 2;
    slots_.assign(capacity, Slot{kEmpty, 0});
    mask_ = capacity - 1;
  }

  // Later entries for the same pair overwrite earlier ones, as dict(zip(merges, ranks)) does.
  void set(std::uint32_t left, std::uint32_t right, std::uint32_t rank, std::uint32_t merged) {
    std::uint64_t key = pack(left, right);
    std::size_t i = index(key);
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
    slots_[i] = Slot{key, (std::uint64_t{rank} << 32) | merged};
  }

  std::uint64_t find(std::uint32_t left, std::uint32_t right) const {
    std::uint64_t key = pack(left, right);
    for (std::size_t i = index(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return slots_[i].value;
      if (slots_[i].key == kEmpty) return kNoMerge;
    }
  }

  static std::uint32_t rank_of(std::uint64_t value) { return static_cast<std::uint32_t>(value >> 32); }
  static std::uint32_t merged_of(std::uint64_t value) { return static_cast<std::uint32_t>(value); }

private:
  struct Slot {
    std::uint64_t key;
    std::uint64_t value;
  };
  // Symbols are fewer than 2^32 - 1, so no real pair packs to all ones.
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  static std::uint64_t pack(std::uint32_t l, std::uint32_t r) { return (std::uint64_t{l} << 32) | r; }
  std::size_t index(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 29) & mask_;
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
};

// ----------------------------------------------------------------------------------------------
// Piece keys for the cache. A piece of up to 8 bytes is its own key ("head", zero-padded,
// little-endian), so most lookups compare one integer and never touch a key arena. Loads
// overlap at the ends instead of looping over bytes.

inline std::uint64_t load64(const char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline std::uint64_t load32(const char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline std::uint64_t load16(const char* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// The first min(n, 8) bytes of p as a zero-padded little-endian integer (n >= 1). The cache
// trusts it as the whole key of a short piece, so the overlapping loads must land byte-exact.
static_assert(std::endian::native == std::endian::little, "piece_head assumes little-endian loads");
inline std::uint64_t piece_head(const char* p, std::size_t n) {
  if (n >= 8) return load64(p);
  if (n >= 4) return load32(p) | (load32(p + n - 4) << (8 * (n - 4)));
  if (n >= 2) return load16(p) | (static_cast<std::uint64_t>(static_cast<unsigned char>(p[n - 1])) << (8 * (n - 1)));
  return static_cast<unsigned char>(p[0]);
}

// Equality of two byte strings of the same length n > 8, without a call for short ones.
inline bool same_long_bytes(const char* a, const char* b, std::size_t n) {
  if (n > 16) return std::memcmp(a, b, n) == 0;
  return load64(a) == load64(b) && load64(a + n - 8) == load64(b + n - 8);
}

inline std::uint64_t finalize(std::uint64_t h) {
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  return h;
}

constexpr std::uint64_t kHashK1 = 0x9E3779B97F4A7C15ull;
constexpr std::uint64_t kHashK2 = 0xC2B2AE3D27D4EB4Full;

inline std::uint64_t hash_piece(const char* p, std::size_t n, std::uint64_t head) {
  std::uint64_t h = (head ^ (n * kHashK1)) * kHashK2;
  if (n > 8) {
    for (std::size_t i = 8; i + 8 < n; i += 8) h = (h ^ load64(p + i)) * kHashK2 + kHashK1;
    h = (h ^ load64(p + n - 8)) * kHashK2;
  }
  return finalize(h);
}

// ----------------------------------------------------------------------------------------------
// Per-instance cache: piece bytes -> token ids. Same role as Megatron's unbounded dict cache, but
// cleared when it reaches a size cap so that adversarial text cannot exhaust memory (results do
// not depend on the cache).

class PieceCache {
public:
  static constexpr std::size_t kMaxPieceBytes = 255;

  PieceCache() { reset(kInitialSlots); }

  // Appends the cached ids of `piece` (1..kMaxPieceBytes bytes) to out; false if not cached.
  bool append_cached(std::string_view piece, std::uint64_t head, std::uint64_t hash,
                     std::vector<TokenId>& out) const {
    const std::size_t n = piece.size();
    for (std::size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.len == 0) return false;
      if (s.head != head || s.len != n) continue;
      std::size_t ids_at = static_cast<std::size_t>(s.value);
      if (n > 8) {
        if (!same_long_bytes(arena_.data() + ids_at, piece.data(), n)) continue;
        ids_at += aligned(n);
      } else if (s.count == 1) {
        out.push_back(s.value);
        return true;
      }
      const std::size_t old = out.size();
      out.resize(old + s.count);
      std::memcpy(out.data() + old, arena_.data() + ids_at, s.count * sizeof(TokenId));
      return true;
    }
  }

  void insert(std::string_view piece, std::uint64_t head, std::uint64_t hash,
              const std::vector<TokenId>& ids) {
    const std::size_t n = piece.size();
    if ((size_ + 1) * 2 > slots_.size()) {
      if (slots_.size() >= kMaxSlots) reset(kInitialSlots);
      else grow();
    }
    if (arena_.size() + aligned(n) + ids.size() * sizeof(TokenId) > kMaxArenaBytes) reset(kInitialSlots);
    Slot s;
    s.head = head;
    s.len = static_cast<std::uint8_t>(n);
    s.count = static_cast<std::uint8_t>(ids.size());
    if (n <= 8 && ids.size() == 1) {
      s.value = ids[0];
    } else {
      // Arena record: [key bytes, padded to 4, if the key is longer than 8][ids].
      s.value = static_cast<TokenId>(arena_.size());
      if (n > 8) arena_.append(piece).append(aligned(n) - n, '\0');
      arena_.append(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(TokenId));
    }
    place(s, hash);
    ++size_;
  }

private:
  struct Slot {
    std::uint64_t head = 0;
    TokenId value = 0;       // the id when short with one id, else an arena offset
    std::uint8_t len = 0;    // piece bytes; 0 marks an empty slot (pieces are never empty)
    std::uint8_t count = 0;  // number of ids (at most the piece length)
  };
  static constexpr std::size_t kInitialSlots = 1u << 12;
  static constexpr std::size_t kMaxSlots = 1u << 20;  // 16 MiB of slots, ~512k pieces
  static constexpr std::size_t kMaxArenaBytes = 64u << 20;

  static std::size_t aligned(std::size_t n) { return (n + 3) & ~std::size_t{3}; }

  void reset(std::size_t slots) {
    slots_.assign(slots, Slot{});
    mask_ = slots - 1;
    arena_.clear();
    size_ = 0;
  }

  void place(const Slot& s, std::uint64_t hash) {
    std::size_t i = hash & mask_;
    while (slots_[i].len != 0) i = (i + 1) & mask_;
    slots_[i] = s;
  }

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.len == 0) continue;
      const char* key = s.len > 8 ? arena_.data() + s.value : nullptr;
      place(s, hash_piece(key, s.len, s.head));
    }
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::string arena_;
  std::size_t size_ = 0;
};

[[noreturn]] void fail_file(const char* what, const std::string& path, const std::string& why) {
  throw Error(std::string(what) + " '" + path + "': " + why);
}

}  // namespace

// ----------------------------------------------------------------------------------------------

struct Gpt2BpeTokenizer::Tables {
  std::string vocab_file;
  std::string merge_file;
  std::int64_t vocab_size = 0;
  TokenId eod = 0;

  // Decoding, indexed by token id.
  enum class IdKind : std::uint8_t { kAbsent, kBytes, kNotByteAlphabet };
  std::vector<std::string> id_bytes;
  std::vector<IdKind> id_kind;

  // Encoding. Symbols are the distinct byte strings BPE can build; a symbol that is not a vocab
  // token (possible only with an unusual merges file) encodes as id 0, like encoder.get(t, 0).
  std::array<std::uint32_t, 256> byte_symbol{};
  std::array<TokenId, 256> byte_token{};
  std::vector<TokenId> symbol_token;
  MergeTable merges;
};

class Gpt2BpeTokenizer::Workspace {
public:
  void encode_piece(const Tables& t, std::string_view piece, std::vector<TokenId>& out);

private:
  void bpe(const Tables& t, std::string_view piece);
  void bpe_short(const Tables& t, std::string_view piece);
  void bpe_long(const Tables& t, std::string_view piece);

  // Short pieces rescan an array for the best pair each round (no heap, branch-light); long
  // ones use a heap so that a pathological megabyte-long word stays O(n log n).
  static constexpr std::size_t kLongPiece = 48;

  PieceCache cache_;
  std::vector<TokenId> piece_ids_;
  std::vector<std::uint32_t> syms_, syms_next_;
  std::vector<std::uint64_t> pairs_, pairs_next_;
  std::vector<std::uint32_t> next_, prev_;
  std::vector<std::uint64_t> heap_, pending_;
};

void Gpt2BpeTokenizer::Workspace::encode_piece(const Tables& t, std::string_view piece,
                                               std::vector<TokenId>& out) {
  if (piece.size() == 1) {
    out.push_back(t.byte_token[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (piece.size() > PieceCache::kMaxPieceBytes) {
    bpe(t, piece);
    out.insert(out.end(), piece_ids_.begin(), piece_ids_.end());
    return;
  }
  const std::uint64_t head = piece_head(piece.data(), piece.size());
  const std::uint64_t hash = hash_piece(piece.data(), piece.size(), head);
  if (cache_.append_cached(piece, head, hash, out)) return;
  bpe(t, piece);
  cache_.insert(piece, head, hash, piece_ids_);
  out.insert(out.end(), piece_ids_.begin(), piece_ids_.end());
}

void Gpt2BpeTokenizer::Workspace::bpe(const Tables& t, std::string_view piece) {
  piece_ids_.clear();
  if (piece.size() <= kLongPiece) bpe_short(t, piece);
  else bpe_long(t, piece);
}

// Megatron's loop literally: find the lowest-ranked adjacent pair, merge all its occurrences
// left to right, repeat. pairs_[i] caches the merge value of (syms_[i], syms_[i+1]) so that a
// round only looks up the pairs next to a merge.
void Gpt2BpeTokenizer::Workspace::bpe_short(const Tables& t, std::string_view piece) {
  std::size_t n = piece.size();
  syms_.resize(n);
  pairs_.resize(n);
  syms_next_.resize(n);
  pairs_next_.resize(n);
  for (std::size_t i = 0; i < n; ++i) syms_[i] = t.byte_symbol[static_cast<unsigned char>(piece[i])];
  for (std::size_t i = 0; i + 1 < n; ++i) pairs_[i] = t.merges.find(syms_[i], syms_[i + 1]);
  pairs_[n - 1] = kNoMerge;

  while (n > 1) {
    const std::uint64_t best = *std::min_element(pairs_.begin(), pairs_.begin() + (n - 1));
    if (best == kNoMerge) break;
    const std::uint32_t merged = MergeTable::merged_of(best);
    // Ranks are unique per pair, so pairs_[i] == best identifies the pair being merged.
    std::size_t m = 0;
    std::size_t prev_source = SIZE_MAX;  // source index of syms_next_[m-1] if copied unchanged
    for (std::size_t i = 0; i < n;) {
      std::uint32_t sym;
      std::size_t source;
      if (pairs_[i] == best) {
        sym = merged;
        source = SIZE_MAX;
        i += 2;
      } else {
        sym = syms_[i];
        source = i;
        i += 1;
      }
      syms_next_[m] = sym;
      if (m > 0) {
        pairs_next_[m - 1] = (source != SIZE_MAX && prev_source != SIZE_MAX)
                                 ? pairs_[prev_source]
                                 : t.merges.find(syms_next_[m - 1], sym);
      }
      prev_source = source;
      ++m;
    }
    pairs_next_[m - 1] = kNoMerge;
    syms_.swap(syms_next_);
    pairs_.swap(pairs_next_);
    n = m;
  }
  for (std::size_t i = 0; i < n; ++i) piece_ids_.push_back(t.symbol_token[syms_[i]]);
}

// The same result with a min-heap of (rank, position) over a linked list of symbols. Popping by
// position within a rank merges left to right; pairs created while a rank is being merged wait
// in pending_ until that rank is done, as Megatron finishes a whole pass before choosing again.
void Gpt2BpeTokenizer::Workspace::bpe_long(const Tables& t, std::string_view piece) {
  const std::size_t n = piece.size();
  if (n >= UINT32_MAX) throw Error("GPT-2 tokenizer: a single pre-tokenized piece exceeds 4 GiB");
  constexpr std::uint32_t kNone = UINT32_MAX;
  syms_.resize(n);
  next_.resize(n);
  prev_.resize(n);
  heap_.clear();
  pending_.clear();
  auto entry = [](std::uint64_t value, std::size_t pos) {
    return (std::uint64_t{MergeTable::rank_of(value)} << 32) | pos;
  };
  for (std::size_t i = 0; i < n; ++i) {
    syms_[i] = t.byte_symbol[static_cast<unsigned char>(piece[i])];
    next_[i] = i + 1 < n ? static_cast<std::uint32_t>(i + 1) : kNone;
    prev_[i] = i > 0 ? static_cast<std::uint32_t>(i - 1) : kNone;
  }
  for (std::size_t i = 0; i + 1 < n; ++i) {
    std::uint64_t v = t.merges.find(syms_[i], syms_[i + 1]);
    if (v != kNoMerge) heap_.push_back(entry(v, i));
  }
  auto later = std::greater<std::uint64_t>();
  std::make_heap(heap_.begin(), heap_.end(), later);
  std::uint32_t current_rank = kNone;
  while (!heap_.empty() || !pending_.empty()) {
    if (!pending_.empty() && (heap_.empty() || (heap_.front() >> 32) != current_rank)) {
      for (std::uint64_t e : pending_) {
        heap_.push_back(e);
        std::push_heap(heap_.begin(), heap_.end(), later);
      }
      pending_.clear();
    }
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const std::uint64_t top = heap_.back();
    heap_.pop_back();
    const auto rank = static_cast<std::uint32_t>(top >> 32);
    const auto pos = static_cast<std::uint32_t>(top);
    const std::uint32_t right = next_[pos];
    if (syms_[pos] == kNone || right == kNone) continue;
    const std::uint64_t v = t.merges.find(syms_[pos], syms_[right]);
    if (v == kNoMerge || MergeTable::rank_of(v) != rank) continue;  // stale entry
    current_rank = rank;
    syms_[pos] = MergeTable::merged_of(v);
    syms_[right] = kNone;
    next_[pos] = next_[right];
    if (next_[pos] != kNone) prev_[next_[pos]] = pos;
    if (prev_[pos] != kNone) {
      std::uint64_t w = t.merges.find(syms_[prev_[pos]], syms_[pos]);
      if (w != kNoMerge) pending_.push_back(entry(w, prev_[pos]));
    }
    if (next_[pos] != kNone) {
      std::uint64_t w = t.merges.find(syms_[pos], syms_[next_[pos]]);
      if (w != kNoMerge) pending_.push_back(entry(w, pos));
    }
  }
  for (std::uint32_t i = 0; i != kNone; i = next_[i]) piece_ids_.push_back(t.symbol_token[syms_[i]]);
}

// ----------------------------------------------------------------------------------------------
// Loading

namespace {

struct VocabEntry {
  std::string token;  // as written in the file (byte alphabet, UTF-8)
  TokenId id;
};

// json.load semantics: a duplicate key keeps its first position and its last id.
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

// str.isspace() as used by str.split(): Unicode White_Space plus U+001C..U+001F.
bool python_isspace(char32_t cp) {
  if (cp >= 0x1C && cp <= 0x1F) return true;
  return cp < 0x110000 && PretokenClasses::instance().of(cp) == PretokenClass::kSpace;
}

// Calls fn(rank, left, right) for each "left right" line of a merges file, reproducing
// open(path, encoding='utf-8').read().split('\n')[1:-1] and line.split(): universal newlines,
// first line skipped, the text after the last newline ignored, lines of other than two fields
// kept as ranks that can never match.
template <class Fn>
void read_merges(const std::string& path, Fn&& fn) {
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

}  // namespace

std::unique_ptr<Gpt2BpeTokenizer> Gpt2BpeTokenizer::load(const std::string& vocab_file,
                                                         const std::string& merge_file) {
  auto t = std::make_shared<Tables>();
  t->vocab_file = vocab_file;
  t->merge_file = merge_file;

  std::vector<VocabEntry> vocab = read_vocab(vocab_file);
  t->vocab_size = static_cast<std::int64_t>(vocab.size());
  TokenId max_id = 0;
  for (const VocabEntry& e : vocab) max_id = std::max(max_id, e.id);
  t->id_bytes.resize(static_cast<std::size_t>(max_id) + 1);
  t->id_kind.assign(static_cast<std::size_t>(max_id) + 1, Tables::IdKind::kAbsent);

  std::unordered_map<std::string, std::uint32_t> symbol_of;  // bytes -> symbol
  symbol_of.reserve(vocab.size() + 256);
  auto intern = [&](const std::string& bytes, TokenId token) {
    auto [it, inserted] = symbol_of.try_emplace(bytes, static_cast<std::uint32_t>(t->symbol_token.size()));
    if (inserted) t->symbol_token.push_back(token);
    return it->second;
  };

  bool have_eod = false;
  std::string bytes;
  for (const VocabEntry& e : vocab) {
    if (e.token == "<|endoftext|>") {
      t->eod = e.id;
      have_eod = true;
    }
    auto id = static_cast<std::size_t>(e.id);
    if (alphabet_to_bytes(e.token, bytes)) {
      // decoder = {v: k for k, v in encoder.items()}: the last token with an id wins.
      t->id_bytes[id] = bytes;
      t->id_kind[id] = Tables::IdKind::kBytes;
      intern(bytes, e.id);
    } else {
      t->id_bytes[id].clear();
      t->id_kind[id] = Tables::IdKind::kNotByteAlphabet;
    }
  }
  if (!have_eod) fail_file("GPT-2 vocab file", vocab_file, "no entry for \"<|endoftext|>\"");
  for (int b = 0; b < 256; ++b) {
    t->byte_symbol[b] = intern(std::string(1, static_cast<char>(b)), 0);
    t->byte_token[b] = t->symbol_token[t->byte_symbol[b]];
  }

  struct Merge {
    std::uint32_t rank, left, right, merged;
  };
  std::vector<Merge> merges;
  std::string left_bytes;
  std::string right_bytes;
  read_merges(merge_file, [&](std::uint32_t rank, std::string_view left, std::string_view right) {
    // A merge naming characters outside the byte alphabet can never apply.
    if (!alphabet_to_bytes(left, left_bytes) || !alphabet_to_bytes(right, right_bytes)) return;
    std::uint32_t l = intern(left_bytes, 0);
    std::uint32_t r = intern(right_bytes, 0);
    left_bytes += right_bytes;
    std::uint32_t m = intern(left_bytes, 0);
    merges.push_back({rank, l, r, m});
  });
  t->merges.reserve(merges.size());
  for (const Merge& m : merges) t->merges.set(m.left, m.right, m.rank, m.merged);

  return std::make_unique<Gpt2BpeTokenizer>(Private{}, std::move(t));
}

Gpt2BpeTokenizer::Gpt2BpeTokenizer(Private, std::shared_ptr<const Tables> tables)
    : tables_(std::move(tables)), work_(std::make_unique<Workspace>()) {}

Gpt2BpeTokenizer::~Gpt2BpeTokenizer() = default;

std::unique_ptr<Tokenizer> Gpt2BpeTokenizer::clone() const {
  return std::make_unique<Gpt2BpeTokenizer>(Private{}, tables_);
}

std::int64_t Gpt2BpeTokenizer::vocab_size() const { return tables_->vocab_size; }
TokenId Gpt2BpeTokenizer::eod() const { return tables_->eod; }
std::vector<std::string> Gpt2BpeTokenizer::tokenizer_paths() const {
  return {tables_->vocab_file, tables_->merge_file};
}

void Gpt2BpeTokenizer::tokenize(std::string_view text, std::vector<TokenId>& out) {
  const Tables& t = *tables_;
  Workspace& w = *work_;
  for_each_piece(text, [&](std::string_view piece) { w.encode_piece(t, piece, out); });
}

std::vector<std::string_view> Gpt2BpeTokenizer::pretokenize(std::string_view text) {
  std::vector<std::string_view> pieces;
  for_each_piece(text, [&](std::string_view piece) { pieces.push_back(piece); });
  return pieces;
}

// ----------------------------------------------------------------------------------------------
// Decoding

namespace {

// Python's UTF-8 decoder with errors='replace': each maximal subpart of an ill-formed sequence
// (the longest prefix of a valid sequence, or one byte) becomes one U+FFFD.
std::string replace_invalid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  auto u = [&](std::size_t i) { return static_cast<unsigned char>(bytes[i]); };
  std::size_t pos = 0;
  const std::size_t n = bytes.size();
  while (pos < n) {
    unsigned char b = u(pos);
    if (b < 0x80) {
      out += static_cast<char>(b);
      ++pos;
      continue;
    }
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b == 0xE0) { len = 3; lo = 0xA0; }
    else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) len = 3;
    else if (b == 0xED) { len = 3; hi = 0x9F; }
    else if (b == 0xF0) { len = 4; lo = 0x90; }
    else if (b >= 0xF1 && b <= 0xF3) len = 4;
    else if (b == 0xF4) { len = 4; hi = 0x8F; }
    std::size_t good = 1;  // bytes of a valid prefix; a stray byte is a subpart of one
    if (len > 0 && pos + 1 < n && u(pos + 1) >= lo && u(pos + 1) <= hi) {
      good = 2;
      while (good < len && pos + good < n && (u(pos + good) & 0xC0) == 0x80) ++good;
    }
    if (len > 0 && good == len) {
      out.append(bytes.substr(pos, len));
      pos += len;
    } else {
      out += "\xEF\xBF\xBD";
      pos += good;
    }
  }
  return out;
}

}  // namespace

std::string Gpt2BpeTokenizer::detokenize(std::span<const TokenId> ids) const {
  const Tables& t = *tables_;
  std::string bytes;
  for (TokenId id : ids) {
    auto i = static_cast<std::size_t>(id);
    if (id < 0 || i >= t.id_kind.size() || t.id_kind[i] == Tables::IdKind::kAbsent)
      throw Error("GPT-2 tokenizer: token id " + std::to_string(id) + " is not in the vocabulary '" +
                  t.vocab_file + "'");
    if (t.id_kind[i] == Tables::IdKind::kNotByteAlphabet)
      throw Error("GPT-2 tokenizer: token id " + std::to_string(id) + " of '" + t.vocab_file +
                  "' has characters outside GPT-2's byte alphabet and cannot be decoded");
    bytes += t.id_bytes[i];
  }
  if (!utf8::find_invalid(bytes)) return bytes;
  return replace_invalid_utf8(bytes);
}

}  // namespace mgt
