// One byte per Unicode code point, looked up in constant time: a two-stage table, since most
// 256-code-point blocks repeat (unassigned planes, CJK), so storing each distinct block once
// keeps the table in cache (about 100 KB instead of 1.1 MB). The character-class tables of the
// pre-tokenizers are built on it.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace mgt::unicode {

class CodePointTable {
public:
  static constexpr char32_t kCodePoints = 0x110000;

  // `flat` holds the byte of every code point 0 … kCodePoints − 1.
  explicit CodePointTable(const std::vector<std::uint8_t>& flat);

  // The byte of cp; `beyond` past the last code point.
  std::uint8_t of(char32_t cp, std::uint8_t beyond) const {
    if (cp >= kCodePoints) return beyond;
    return blocks_[block_index_[cp >> kBlockBits] * kBlockSize + (cp & (kBlockSize - 1))];
  }

private:
  static constexpr int kBlockBits = 8;
  static constexpr char32_t kBlockSize = 1u << kBlockBits;

  std::array<std::uint16_t, kCodePoints / kBlockSize> block_index_{};
  std::vector<std::uint8_t> blocks_;  // the distinct blocks, kBlockSize bytes each
};

}  // namespace mgt::unicode
