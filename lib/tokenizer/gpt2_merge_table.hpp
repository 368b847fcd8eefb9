// The merges of GPT-2's BPE as a hash table. Header-only: BPE probes it in its inner loop.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mgt::gpt2 {

// Merge table: (left symbol, right symbol) -> (rank, merged symbol), open addressing over the
// packed pair. Values pack rank in the high half so that comparing values compares ranks.

inline constexpr std::uint64_t kNoMerge = ~std::uint64_t{0};

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

}  // namespace mgt::gpt2
