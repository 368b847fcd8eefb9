// mgt's own encoder for SentencePiece BPE models whose settings it reproduces exactly (Llama 2
// style: identity normalizer, no user-defined or unused pieces); everything else stays with the
// SentencePiece library. The library's bpe::Model merges over the whole text with a hash map of
// string_views and a heap of heap-allocated pairs; this one merges word by word over a flat piece
// index and remembers whole words, which is exact only where no piece can span a word boundary
// (checked per model in `build`).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/gpt2_piece_cache.hpp"
#include "tokenizer/sentencepiece_model_proto.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

// The immutable part, shared by every clone of a tokenizer.
class SentencePieceBpeTables {
public:
  // nullopt when the model has a setting this encoder does not reproduce (then the caller keeps
  // using the library); `why_not` says which.
  static std::shared_ptr<const SentencePieceBpeTables> build(const SentencePieceModelProto& model,
                                                             std::string* why_not = nullptr);

  struct Found {
    TokenId id;
    float score;
  };
  // The NORMAL piece with exactly these bytes (the pieces the library's bpe::Model merges into).
  const Found* find(const char* p, std::size_t n) const;

  bool add_dummy_prefix = true;
  bool byte_fallback = false;
  // Whether no piece has U+2581 after a non-U+2581 character, so that the normalized text can be
  // cut before each run of U+2581 and the words encoded (and cached) independently.
  bool words_are_independent = false;
  TokenId unk_id = 0;
  TokenId byte_ids[256] = {};  // PieceToId("<0xXX>"), the unknown id where missing

private:
  struct Slot {
    std::uint64_t head = 0;
    std::uint32_t offset = 0;
    std::uint32_t len = 0;  // 0 marks an empty slot (pieces are never empty)
    Found found{};
  };
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::string bytes_;
};

// Per-instance working memory and word cache; not thread-safe, one per tokenizer clone.
class SentencePieceBpeEncoder {
public:
  explicit SentencePieceBpeEncoder(std::shared_ptr<const SentencePieceBpeTables> tables)
      : tables_(std::move(tables)) {}

  // Appends the ids SentencePieceProcessor::Encode gives for `text`; false (appending nothing)
  // when the text is not valid UTF-8, whose replacement the library does itself, or over 1 GiB.
  bool encode(std::string_view text, std::vector<TokenId>& out);

private:
  void encode_words(std::string_view normalized, std::vector<TokenId>& out);
  void encode_word(std::string_view word, std::vector<TokenId>& out);
  void merge(std::string_view word, std::vector<TokenId>& out);

  struct Symbol {
    std::uint32_t begin, len;
    int prev, next;
  };
  struct Candidate {
    float score;
    int left;
    std::uint32_t len;  // merged length when pushed; a different sum now means it is stale
  };
  std::shared_ptr<const SentencePieceBpeTables> tables_;
  std::string normalized_;
  std::vector<Symbol> symbols_;
  std::vector<Candidate> heap_;
  std::vector<TokenId> word_ids_;
  gpt2::PieceCache cache_;
};

}  // namespace mgt
