#include "tokenizer/byte_bpe.hpp"

#include <algorithm>
#include <cstring>
#include <functional>

#include "core/error.hpp"

namespace mgt {

std::uint64_t ByteBpeTables::hash_bytes(std::string_view bytes) {
  if (bytes.empty()) return 0;
  return gpt2::hash_piece(bytes.data(), bytes.size(), gpt2::piece_head(bytes.data(), bytes.size()));
}

std::size_t ByteBpeTables::find_slot(std::string_view bytes, std::uint64_t hash) const {
  for (std::size_t i = hash & symbol_mask_;; i = (i + 1) & symbol_mask_) {
    const SymbolSlot& s = symbol_index_[i];
    if (s.symbol == kEmptySlot) return i;
    if (s.hash == hash && s.length == bytes.size() &&
        (bytes.empty() || std::memcmp(symbol_bytes_.data() + s.offset, bytes.data(), bytes.size()) == 0))
      return i;
  }
}

std::uint32_t ByteBpeTables::intern(std::string_view bytes) {
  const std::uint64_t hash = hash_bytes(bytes);
  const std::size_t i = find_slot(bytes, hash);
  if (symbol_index_[i].symbol != kEmptySlot) return symbol_index_[i].symbol;
  if (symbol_bytes_.size() + bytes.size() >= UINT32_MAX) throw Error("BPE: the vocabulary's tokens exceed 4 GiB");
  const auto symbol = static_cast<std::uint32_t>(symbol_token_.size());
  symbol_index_[i] = SymbolSlot{hash, static_cast<std::uint32_t>(symbol_bytes_.size()),
                                static_cast<std::uint32_t>(bytes.size()), symbol};
  symbol_bytes_ += bytes;
  symbol_token_.push_back(kNoToken);
  if (2 * ++interned_ > symbol_index_.size()) grow_symbol_index();
  return symbol;
}

std::optional<std::uint32_t> ByteBpeTables::symbol_of(std::string_view bytes) const {
  const SymbolSlot& s = symbol_index_[find_slot(bytes, hash_bytes(bytes))];
  if (s.symbol == kEmptySlot) return std::nullopt;
  return s.symbol;
}

void ByteBpeTables::grow_symbol_index() {
  std::vector<SymbolSlot> old(2 * symbol_index_.size(), SymbolSlot{0, 0, 0, kEmptySlot});
  old.swap(symbol_index_);
  symbol_mask_ = symbol_index_.size() - 1;
  for (const SymbolSlot& s : old) {
    if (s.symbol == kEmptySlot) continue;
    std::size_t i = s.hash & symbol_mask_;
    while (symbol_index_[i].symbol != kEmptySlot) i = (i + 1) & symbol_mask_;
    symbol_index_[i] = s;
  }
}

void ByteBpeTables::add_merge(std::uint32_t left, std::uint32_t right, std::uint32_t rank,
                              std::uint32_t merged) {
  pending_merges_.push_back({left, right, rank, merged});
}

void ByteBpeTables::finish() {
  for (int b = 0; b < 256; ++b) byte_symbol_[b] = intern(std::string(1, static_cast<char>(b)));
  // A symbol no string maps to: not in the index, so no vocabulary entry or merge can name it.
  unknown_symbol_ = static_cast<std::uint32_t>(symbol_token_.size());
  symbol_token_.push_back(kNoToken);
  // MergeTable::set lets a later entry win; insert in reverse so that the first one does.
  merges_.reserve(pending_merges_.size());
  for (auto it = pending_merges_.rbegin(); it != pending_merges_.rend(); ++it)
    merges_.set((*it)[0], (*it)[1], (*it)[2], (*it)[3]);
  pending_merges_.clear();
  pending_merges_.shrink_to_fit();
}

void ByteBpeEncoder::encode(const ByteBpeTables& t, std::string_view piece, std::vector<TokenId>& out) {
  if (piece.empty()) return;
  if (piece.size() == 1) {
    // One byte is one symbol in every mode (char_symbols interns it as the byte's symbol).
    const TokenId id = t.token_of(t.byte_symbol(static_cast<unsigned char>(piece[0])));
    if (id != ByteBpeTables::kNoToken) {
      out.push_back(id);
      return;
    }
  }
  if (piece.size() > gpt2::PieceCache::kMaxPieceBytes) {
    encode_uncached(t, piece);
    out.insert(out.end(), piece_ids_.begin(), piece_ids_.end());
    return;
  }
  const std::uint64_t head = gpt2::piece_head(piece.data(), piece.size());
  const std::uint64_t hash = gpt2::hash_piece(piece.data(), piece.size(), head);
  if (cache_.append_cached(piece, head, hash, out)) return;
  encode_uncached(t, piece);
  cache_.insert(piece, head, hash, piece_ids_);
  out.insert(out.end(), piece_ids_.begin(), piece_ids_.end());
}

// The ids of one piece into piece_ids_.
void ByteBpeEncoder::encode_uncached(const ByteBpeTables& t, std::string_view piece) {
  piece_ids_.clear();
  if (t.ignore_merges) {
    if (auto s = t.symbol_of(piece); s && t.token_of(*s) != ByteBpeTables::kNoToken) {
      piece_ids_.push_back(t.token_of(*s));
      return;
    }
  }
  if (t.char_symbols) {
    start_from_characters(t, piece);
  } else {
    syms_.resize(piece.size());
    for (std::size_t i = 0; i < piece.size(); ++i) syms_[i] = t.byte_symbol(static_cast<unsigned char>(piece[i]));
  }
  if (syms_.size() <= kLongPiece) merge_short(t);
  else merge_long(t);
  emit(t, piece_ids_);
}

void ByteBpeEncoder::start_from_characters(const ByteBpeTables& t, std::string_view piece) {
  syms_.clear();
  std::size_t i = 0;
  while (i < piece.size()) {
    // One UTF-8 character (a stray continuation or truncated byte counts as one character,
    // as it never occurs in text that came from a Rust string).
    std::size_t end = i + 1;
    while (end < piece.size() && (static_cast<unsigned char>(piece[end]) & 0xC0) == 0x80 && end - i < 4) ++end;
    const std::string_view ch = piece.substr(i, end - i);
    if (auto s = t.symbol_of(ch); s && t.token_of(*s) != ByteBpeTables::kNoToken) {
      syms_.push_back(*s);
    } else {
      bool every_byte = true;
      for (char b : ch)
        every_byte &= t.token_of(t.byte_symbol(static_cast<unsigned char>(b))) != ByteBpeTables::kNoToken;
      if (every_byte) {
        for (char b : ch) syms_.push_back(t.byte_symbol(static_cast<unsigned char>(b)));
      } else {
        syms_.push_back(t.unknown_symbol());
      }
    }
    i = end;
  }
}

// Rescans the pairs for the lowest (rank, position) after each merge: quadratic, but pieces
// this short make it cheaper than a heap.
void ByteBpeEncoder::merge_short(const ByteBpeTables& t) {
  std::size_t n = syms_.size();
  while (n > 1) {
    std::uint64_t best = gpt2::kNoMerge;
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < n; ++i) {
      const std::uint64_t v = t.merges().find(syms_[i], syms_[i + 1]);
      if (v < best) {  // values order by rank; strict < keeps the leftmost on a tie
        best = v;
        at = i;
      }
    }
    if (best == gpt2::kNoMerge) break;
    syms_[at] = gpt2::MergeTable::merged_of(best);
    syms_.erase(syms_.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    --n;
  }
}

// The same order with a min-heap of (rank, position) over a linked list, as tokenizers' Word
// does: an entry whose pair has changed since it was pushed is stale and skipped.
void ByteBpeEncoder::merge_long(const ByteBpeTables& t) {
  const std::size_t n = syms_.size();
  if (n >= UINT32_MAX) throw Error("BPE: a single pre-tokenized piece exceeds 4 GiB");
  constexpr std::uint32_t kNone = UINT32_MAX;
  next_.resize(n);
  prev_.resize(n);
  heap_.clear();
  auto entry = [](std::uint64_t value, std::size_t pos) {
    return (std::uint64_t{gpt2::MergeTable::rank_of(value)} << 32) | pos;
  };
  for (std::size_t i = 0; i < n; ++i) {
    next_[i] = i + 1 < n ? static_cast<std::uint32_t>(i + 1) : kNone;
    prev_[i] = i > 0 ? static_cast<std::uint32_t>(i - 1) : kNone;
  }
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const std::uint64_t v = t.merges().find(syms_[i], syms_[i + 1]);
    if (v != gpt2::kNoMerge) heap_.push_back(entry(v, i));
  }
  const auto later = std::greater<std::uint64_t>();
  std::make_heap(heap_.begin(), heap_.end(), later);
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const std::uint64_t top = heap_.back();
    heap_.pop_back();
    const auto rank = static_cast<std::uint32_t>(top >> 32);
    const auto pos = static_cast<std::uint32_t>(top);
    const std::uint32_t right = next_[pos];
    if (syms_[pos] == kNone || right == kNone) continue;
    const std::uint64_t v = t.merges().find(syms_[pos], syms_[right]);
    if (v == gpt2::kNoMerge || gpt2::MergeTable::rank_of(v) != rank) continue;
    syms_[pos] = gpt2::MergeTable::merged_of(v);
    syms_[right] = kNone;
    next_[pos] = next_[right];
    if (next_[pos] != kNone) prev_[next_[pos]] = pos;
    if (prev_[pos] != kNone) {
      const std::uint64_t w = t.merges().find(syms_[prev_[pos]], syms_[pos]);
      if (w != gpt2::kNoMerge) {
        heap_.push_back(entry(w, prev_[pos]));
        std::push_heap(heap_.begin(), heap_.end(), later);
      }
    }
    if (next_[pos] != kNone) {
      const std::uint64_t w = t.merges().find(syms_[pos], syms_[next_[pos]]);
      if (w != gpt2::kNoMerge) {
        heap_.push_back(entry(w, pos));
        std::push_heap(heap_.begin(), heap_.end(), later);
      }
    }
  }
  std::size_t m = 0;
  for (std::uint32_t i = 0; i != kNone; i = next_[i]) syms_[m++] = syms_[i];
  syms_.resize(m);
}

void ByteBpeEncoder::emit(const ByteBpeTables& t, std::vector<TokenId>& out) {
  bool last_unknown = false;
  for (std::uint32_t s : syms_) {
    const TokenId id = t.token_of(s);
    if (id != ByteBpeTables::kNoToken) {
      out.push_back(id);
      last_unknown = false;
      continue;
    }
    // A byte without a token of its own: tokenizers puts unk_token there, or drops the byte.
    if (t.unk && !(t.fuse_unk && last_unknown)) out.push_back(*t.unk);
    last_unknown = true;
  }
}

}  // namespace mgt
