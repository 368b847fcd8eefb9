// Byte-level BPE as Hugging Face `tokenizers` (models/bpe/word.rs) and tiktoken
// (src/lib.rs byte_pair_merge) run it: start from one symbol per byte, then repeatedly merge the
// adjacent pair of lowest rank, the leftmost one on a tie, one pair at a time. (GPT-2's Python
// loop merges every occurrence of the best pair per round; the results agree on trained merges
// but not on every merges file, hence this separate engine.) The same engine runs the
// SentencePiece-derived BPE of Llama 2-style tokenizer.json files, whose words start from one
// symbol per character instead (char_symbols).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/gpt2_merge_table.hpp"
#include "tokenizer/gpt2_piece_cache.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

// The immutable tables, shared by every instance and thread.
class ByteBpeTables {
public:
  static constexpr TokenId kNoToken = -1;

  // The symbol of a byte string, created on first use. Symbols count up from 0 in order of
  // first use.
  std::uint32_t intern(std::string_view bytes);
  // Without allocating: with ignore_merges it runs once per piece the encoder's cache misses.
  std::optional<std::uint32_t> symbol_of(std::string_view bytes) const;
  void set_token(std::uint32_t symbol, TokenId id) { symbol_token_[symbol] = id; }
  TokenId token_of(std::uint32_t symbol) const { return symbol_token_[symbol]; }
  // Pairs named twice keep their first rank, as tokenizers' and tiktoken's maps do.
  void add_merge(std::uint32_t left, std::uint32_t right, std::uint32_t rank, std::uint32_t merged);
  // Call once every symbol and merge is in.
  void finish();

  // With ignore_merges (tokenizers' option, always on in tiktoken), a piece that is itself a
  // token is taken whole before any merging.
  bool ignore_merges = false;
  // The id of bytes that have no token of their own (tokenizers' unk_token), if any; fuse_unk
  // joins consecutive unknowns into one.
  std::optional<TokenId> unk;
  bool fuse_unk = false;
  // tokenizers' BPE::merge_word for vocabularies of plain strings: a word starts from one symbol
  // per UTF-8 character; a character that is not a token becomes its bytes' tokens (the
  // <0xHH> tokens of byte_fallback, set as the single bytes' tokens) or one unknown symbol.
  bool char_symbols = false;

  std::uint32_t byte_symbol(unsigned char b) const { return byte_symbol_[b]; }
  // With char_symbols: the symbol of a character that has no token and no byte fallback. It has
  // no token and is in no merge, so emit() writes unk for it.
  std::uint32_t unknown_symbol() const { return unknown_symbol_; }
  const gpt2::MergeTable& merges() const { return merges_; }

private:
  static std::uint64_t hash_bytes(std::string_view bytes);
  // The slot holding `bytes`, or the free slot where they would go.
  std::size_t find_slot(std::string_view bytes, std::uint64_t hash) const;
  void grow_symbol_index();

  // Every interned byte string, as open addressing over one buffer of bytes: a node-based map's
  // allocations, cache misses and modulo were most of the time of loading a vocabulary, and of
  // encoding before the encoder's cache took the lookups.
  struct SymbolSlot {
    std::uint64_t hash;
    std::uint32_t offset, length;
    std::uint32_t symbol;  // kEmptySlot for a free slot
  };
  static constexpr std::uint32_t kEmptySlot = UINT32_MAX;
  static constexpr std::size_t kInitialSlots = 16;
  std::vector<SymbolSlot> symbol_index_ = std::vector<SymbolSlot>(kInitialSlots, SymbolSlot{0, 0, 0, kEmptySlot});
  std::size_t symbol_mask_ = kInitialSlots - 1;
  std::size_t interned_ = 0;
  std::string symbol_bytes_;
  std::vector<TokenId> symbol_token_;
  std::vector<std::array<std::uint32_t, 4>> pending_merges_;  // left, right, rank, merged
  std::array<std::uint32_t, 256> byte_symbol_{};
  std::uint32_t unknown_symbol_ = 0;
  gpt2::MergeTable merges_;
};

// The per-instance state: scratch buffers and a cache of encoded pieces. The cache sits in front
// of the whole-piece vocabulary lookup too: a piece's ids depend on nothing but its bytes, and the
// cache's few hot slots (keys of up to 8 bytes inline) miss the CPU caches far less often than
// the vocabulary's index, which was most of a TikToken encode.
class ByteBpeEncoder {
public:
  // Appends the ids of one pre-tokenized piece (raw bytes).
  void encode(const ByteBpeTables& t, std::string_view piece, std::vector<TokenId>& out);

private:
  void encode_uncached(const ByteBpeTables& t, std::string_view piece);
  void start_from_characters(const ByteBpeTables& t, std::string_view piece);
  void merge_short(const ByteBpeTables& t);
  void merge_long(const ByteBpeTables& t);
  void emit(const ByteBpeTables& t, std::vector<TokenId>& out);

  static constexpr std::size_t kLongPiece = 64;

  gpt2::PieceCache cache_;
  std::vector<TokenId> piece_ids_;
  std::vector<std::uint32_t> syms_;
  std::vector<std::uint32_t> next_, prev_;
  std::vector<std::uint64_t> heap_;
};

}  // namespace mgt
