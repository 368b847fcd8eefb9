// The cache of BPE results per piece, which spares most pieces of a text the merging.
// Header-only: it is looked up once per piece.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace mgt::gpt2 {

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

inline constexpr std::uint64_t kHashK1 = 0x9E3779B97F4A7C15ull;
inline constexpr std::uint64_t kHashK2 = 0xC2B2AE3D27D4EB4Full;

inline std::uint64_t hash_piece(const char* p, std::size_t n, std::uint64_t head) {
  std::uint64_t h = (head ^ (n * kHashK1)) * kHashK2;
  if (n > 8) {
    for (std::size_t i = 8; i + 8 < n; i += 8) h = (h ^ load64(p + i)) * kHashK2 + kHashK1;
    h = (h ^ load64(p + n - 8)) * kHashK2;
  }
  return finalize(h);
}

// Open addressing over `slots` (a power of two of them, `mask` = their count - 1), where a slot
// whose `len` is 0 is free: `s` goes to the first free slot from `hash`.
template <typename Slot>
void place_slot(std::vector<Slot>& slots, std::size_t mask, const Slot& s, std::uint64_t hash) {
  std::size_t i = hash & mask;
  while (slots[i].len != 0) i = (i + 1) & mask;
  slots[i] = s;
}

// Doubles the slots, each held one placed again by hash_of(slot).
template <typename Slot, typename HashOf>
void grow_slots(std::vector<Slot>& slots, std::size_t& mask, HashOf hash_of) {
  std::vector<Slot> old(slots.size() * 2);
  old.swap(slots);
  mask = slots.size() - 1;
  for (const Slot& s : old)
    if (s.len != 0) place_slot(slots, mask, s, hash_of(s));
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
    place_slot(slots_, mask_, s, hash);
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

  void grow() {
    grow_slots(slots_, mask_, [&](const Slot& s) {
      return hash_piece(s.len > 8 ? arena_.data() + s.value : nullptr, s.len, s.head);
    });
  }

  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::string arena_;
  std::size_t size_ = 0;
};

}  // namespace mgt::gpt2
