#include "tokenizer/gpt2_bpe_workspace.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>

#include "core/error.hpp"
#include "tokenizer/gpt2_pretokenizer.hpp"

namespace mgt {

using gpt2::hash_piece;
using gpt2::kNoMerge;
using gpt2::MergeTable;
using gpt2::PieceCache;
using gpt2::piece_head;

void Gpt2BpeTokenizer::Workspace::encode(const Tables& t, std::string_view text,
                                         std::vector<TokenId>& out) {
  gpt2::for_each_piece(text, [&](std::string_view piece) { encode_piece(t, piece, out); });
}

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

}  // namespace mgt
