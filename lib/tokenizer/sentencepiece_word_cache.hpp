// The SentencePiece unigram encoder's cache of encoded words: a word's bytes -> its pieces and
// the largest rounding step for which they hold (sentencepiece_unigram_encoder.cpp). Open
// addressing over one slot array, the keys and the pieces in two arenas: a node-based map's
// bucket array, node, key string and piece vector were four cache misses per word, and its
// lookup 42% of an encode. Header-only: it is looked up once per word.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/gpt2_piece_cache.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

class SentencePieceWordCache {
public:
  struct Piece {
    TokenId id;
    std::int32_t begin, end;  // in the word
    float score;
  };
  struct Entry {
    std::span<const Piece> pieces;
    float max_ulp;
  };
  static constexpr std::size_t kMaxWordBytes = 64;
  static constexpr std::size_t kMaxWords = std::size_t{1} << 18;

  SentencePieceWordCache() : slots_(kInitialSlots), mask_(kInitialSlots - 1) {}

  // The key of `word` (1..kMaxWordBytes bytes): its first 8 bytes and its hash.
  struct Key {
    std::uint64_t head, hash;
  };
  static Key key(std::string_view word) {
    const std::uint64_t head = gpt2::piece_head(word.data(), word.size());
    return {head, gpt2::hash_piece(word.data(), word.size(), head)};
  }

  // The cached entry of `word`, or null. A word of one piece has it in its slot (`entry` points
  // there); the others' are in the arena.
  const Entry* find(std::string_view word, Key k, Entry& entry) const {
    const Slot* s = slot_of(word, k);
    if (s->len == 0) return nullptr;
    entry = {s->count == 1 ? std::span<const Piece>(&s->single, 1)
                           : std::span<const Piece>(pieces_.data() + s->pieces_at, s->count),
             s->max_ulp};
    return &entry;
  }

  // Hints for a lookup soon: the slot where the probe of `k` starts; and, once that has arrived,
  // the pieces of `word`'s entry. A text's words are hinted a few ahead of their lookups, so that
  // the cache misses of the words not looked up lately overlap instead of adding up.
  void prefetch_slot(Key k) const { __builtin_prefetch(&slots_[k.hash & mask_]); }
  void prefetch_entry(std::string_view word, Key k) const {
    const Slot* s = slot_of(word, k);
    if (s->len != 0 && s->count != 1) __builtin_prefetch(pieces_.data() + s->pieces_at);
  }

  // Adds `word` (or replaces its entry); ignored once kMaxWords words or kMaxPieces pieces are
  // held (a replaced entry's pieces stay in the arena).
  void insert(std::string_view word, Key k, float max_ulp, std::span<const Piece> pieces) {
    if (pieces_.size() + pieces.size() > kMaxPieces) return;
    if (Slot* s = slot_of(word, k); s->len != 0) {
      store(*s, max_ulp, pieces);
      return;
    }
    if (size_ >= kMaxWords) return;
    if ((size_ + 1) * 2 > slots_.size()) grow();
    Slot s;
    s.head = k.head;
    s.len = static_cast<std::uint8_t>(word.size());
    store(s, max_ulp, pieces);
    if (word.size() > 8) {
      s.key_at = static_cast<std::uint32_t>(keys_.size());
      keys_.append(word);
    }
    gpt2::place_slot(slots_, mask_, s, k.hash);
    ++size_;
  }

private:
  struct Slot {
    std::uint64_t head = 0;        // the word itself when it has at most 8 bytes
    std::uint32_t key_at = 0;      // longer words: their bytes in keys_
    std::uint32_t pieces_at = 0;   // in pieces_, unless the word is one piece
    Piece single{};                // the word's one piece
    float max_ulp = 0.0f;
    std::uint8_t len = 0;          // bytes of the word; 0 marks a free slot
    std::uint8_t count = 0;        // pieces
  };

  void store(Slot& s, float max_ulp, std::span<const Piece> pieces) {
    s.max_ulp = max_ulp;
    s.count = static_cast<std::uint8_t>(pieces.size());
    if (pieces.size() == 1) {
      s.single = pieces[0];
      return;
    }
    s.pieces_at = static_cast<std::uint32_t>(pieces_.size());
    pieces_.insert(pieces_.end(), pieces.begin(), pieces.end());
  }
  static constexpr std::size_t kInitialSlots = std::size_t{1} << 12;
  static constexpr std::size_t kMaxPieces = std::size_t{1} << 22;

  // The slot holding `word`, or the free slot that ends its probe.
  const Slot* slot_of(std::string_view word, Key k) const {
    const std::size_t n = word.size();
    for (std::size_t i = k.hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.len == 0) return &s;
      if (s.head != k.head || s.len != n) continue;
      if (n <= 8 || gpt2::same_long_bytes(keys_.data() + s.key_at, word.data(), n)) return &s;
    }
  }
  Slot* slot_of(std::string_view word, Key k) {
    return const_cast<Slot*>(static_cast<const SentencePieceWordCache*>(this)->slot_of(word, k));
  }

  void grow() {
    gpt2::grow_slots(slots_, mask_, [&](const Slot& s) {
      return gpt2::hash_piece(s.len > 8 ? keys_.data() + s.key_at : nullptr, s.len, s.head);
    });
  }

  std::vector<Slot> slots_;
  std::size_t mask_;
  std::string keys_;
  std::vector<Piece> pieces_;
  std::size_t size_ = 0;
};

}  // namespace mgt
