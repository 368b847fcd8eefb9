#include "tokenizer/code_point_table.hpp"

#include <map>
#include <string>

#include "core/error.hpp"

namespace mgt::unicode {

CodePointTable::CodePointTable(const std::vector<std::uint8_t>& flat) {
  if (flat.size() != kCodePoints) throw Error("CodePointTable: one byte per code point expected");
  std::map<std::string, std::uint16_t> seen;  // block contents -> index in blocks_
  for (std::size_t b = 0; b < block_index_.size(); ++b) {
    std::string block(reinterpret_cast<const char*>(flat.data() + b * kBlockSize), kBlockSize);
    auto [it, inserted] = seen.emplace(block, static_cast<std::uint16_t>(seen.size()));
    if (inserted) blocks_.insert(blocks_.end(), block.begin(), block.end());
    block_index_[b] = it->second;
  }
}

}  // namespace mgt::unicode
