// The per-instance state of GPT-2 encoding: the piece cache and BPE's scratch buffers, so that
// encoding allocates nothing once warm. One per tokenizer instance, hence per thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/gpt2_bpe_tables.hpp"
#include "tokenizer/gpt2_bpe_tokenizer.hpp"
#include "tokenizer/gpt2_piece_cache.hpp"

namespace mgt {

class Gpt2BpeTokenizer::Workspace {
public:
  // Appends the ids of `text`: pre-tokenized, each piece encoded through the cache.
  void encode(const Tables& t, std::string_view text, std::vector<TokenId>& out);

private:
  void encode_piece(const Tables& t, std::string_view piece, std::vector<TokenId>& out);
  void bpe(const Tables& t, std::string_view piece);
  void bpe_short(const Tables& t, std::string_view piece);
  void bpe_long(const Tables& t, std::string_view piece);

  // Short pieces rescan an array for the best pair each round (no heap, branch-light); long
  // ones use a heap so that a pathological megabyte-long word stays O(n log n).
  static constexpr std::size_t kLongPiece = 48;

  gpt2::PieceCache cache_;
  std::vector<TokenId> piece_ids_;
  std::vector<std::uint32_t> syms_, syms_next_;
  std::vector<std::uint64_t> pairs_, pairs_next_;
  std::vector<std::uint32_t> next_, prev_;
  std::vector<std::uint64_t> heap_, pending_;
};

}  // namespace mgt
