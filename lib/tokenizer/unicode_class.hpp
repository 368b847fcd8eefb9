// Code point classes of the GPT-2 pre-tokenizer regex: \p{L}, \p{N}, \s as Python's `regex`
// module defines them, for every code point, looked up in constant time.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace mgt::unicode {

// The four classes the GPT-2 pattern distinguishes; every code point is in exactly one
// (no code point is both White_Space and a letter or number).
enum class PretokenClass : std::uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

class PretokenClasses {
public:
  // Built once from ICU on first use, immutable afterwards (safe to share between threads).
  static const PretokenClasses& instance();

  PretokenClass of(char32_t cp) const {
    if (cp >= kCodePoints) return PretokenClass::kOther;
    return static_cast<PretokenClass>(blocks_[block_index_[cp >> kBlockBits] * kBlockSize +
                                             (cp & (kBlockSize - 1))]);
  }

private:
  PretokenClasses();

  static constexpr char32_t kCodePoints = 0x110000;
  static constexpr int kBlockBits = 8;
  static constexpr char32_t kBlockSize = 1u << kBlockBits;

  // Two-stage table: most 256-code-point blocks repeat (unassigned planes, CJK), so storing each
  // distinct block once keeps the table in cache (about 100 KB instead of 1.1 MB).
  std::array<std::uint16_t, kCodePoints / kBlockSize> block_index_{};
  std::vector<std::uint8_t> blocks_;
};

}  // namespace mgt::unicode
