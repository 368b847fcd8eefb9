// mgt's own encoder for SentencePiece unigram models (the default model type of spm_train, and
// of T5-style vocabularies): the library's normalizer (sentencepiece_normalizer.hpp), then
// unigram_model.cc's EncodeOptimized, the Viterbi pass over the normalized text that keeps, for
// every end position, the best-scoring way to reach it: float sums in the order of the Python
// package 0.2.x, which Megatron-LM runs, rescaled past ±100000, ties to the first found (Debian's
// library 0.1.97 sums in double and breaks some ties otherwise); an unknown character scores
// min_score − 10. Where no piece spans a run of U+2581 the pass goes word by word, and a word
// whose every decision won by more than any base's rounding could change comes from a cache.
// Models it does not reproduce (user-defined pieces, whitespace as a suffix) stay with the
// library, as does text that is not valid UTF-8.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/sentencepiece_model_proto.hpp"
#include "tokenizer/sentencepiece_normalizer.hpp"
#include "tokenizer/sentencepiece_word_cache.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

// The immutable part, shared by every clone of a tokenizer: the pieces as a byte trie.
class SentencePieceUnigramTables {
public:
  // Null when the model is not unigram or has a setting this encoder does not reproduce;
  // `why_not` says which.
  static std::shared_ptr<const SentencePieceUnigramTables> build(const SentencePieceModelProto& model,
                                                                 std::string* why_not = nullptr);

  static constexpr std::int32_t kNone = -1;
  // The child of `node` (0: the root) along byte `c`, or kNone.
  std::int32_t child(std::int32_t node, unsigned char c) const {
    if (node == 0) return root_[c];
    const std::uint32_t begin = child_begin_[static_cast<std::size_t>(node)];
    const std::uint32_t end = child_begin_[static_cast<std::size_t>(node) + 1];
    const void* at = std::memchr(child_bytes_.data() + begin, c, end - begin);
    return at ? static_cast<std::int32_t>(static_cast<const unsigned char*>(at) - child_bytes_.data()) + 1 : kNone;
  }

  struct NodePiece {
    TokenId id = kNone;  // the piece ending at this node (kNone: none, or an unused piece)
    float score = 0.0f;
  };
  std::vector<NodePiece> nodes;
  std::shared_ptr<const SentencePieceNormalizer> normalizer;
  TokenId unk_id = 0;
  float unk_score = 0.0f;  // min_score() - kUnkPenalty
  float max_abs_score = 0.0f;  // the largest |score| of a normal piece or the unknown one
  bool byte_fallback = false;
  TokenId byte_ids[256] = {};
  // No piece has U+2581 after another character: every path passes each run's start.
  bool words_are_independent = true;

private:
  // Nodes are numbered breadth first, each node's children consecutively: the children of node n
  // are nodes child_begin_[n] + 1 … child_begin_[n + 1], the bytes leading to them in
  // child_bytes_[child_begin_[n] …] (so node i + 1 is reached by child_bytes_[i]).
  std::int32_t root_[256];
  std::vector<std::uint32_t> child_begin_;
  std::vector<unsigned char> child_bytes_;
};

// Per-instance working memory; not thread-safe, one per tokenizer clone.
class SentencePieceUnigramEncoder {
public:
  explicit SentencePieceUnigramEncoder(std::shared_ptr<const SentencePieceUnigramTables> tables)
      : tables_(std::move(tables)) {}

  // Appends the ids SentencePieceProcessor::Encode gives for `text`; false (appending nothing)
  // when the text is not valid UTF-8 or over 1 GiB.
  bool encode(std::string_view text, std::vector<TokenId>& out);

private:
  struct Best {
    float score = 0.0f;
    float runner_up = -std::numeric_limits<float>::infinity();  // the best candidate it beat
    float piece_score = 0.0f;  // of the piece ending here
    std::int32_t starts_at = -1;
    TokenId id = SentencePieceUnigramTables::kNone;
  };
  struct Piece {
    TokenId id;
    std::int32_t begin, end;  // in the normalized text
    float score;
  };

  // The best path over `s` (at `offset` in the normalized text) from the score `base`, appended
  // to pieces_; returns its score. min_gap: the smallest margin by which a position's best beat
  // another candidate.
  float viterbi(std::string_view s, std::int32_t offset, float base, float* min_gap);
  // One word (a run of U+2581 and what follows it up to the next run): from the cache where
  // that gives the full pass's result, else by viterbi; `base` moves to the word's end. `key`:
  // the word's cache key, null for a word too long to cache.
  void encode_word(std::string_view word, std::int32_t offset, float& base, const SentencePieceWordCache::Key* key);
  // The text word by word (SentencePieceUnigramTables::words_are_independent).
  void encode_words(std::string_view s);

  std::shared_ptr<const SentencePieceUnigramTables> tables_;
  std::string normalized_;
  std::vector<Best> best_;
  std::vector<Piece> pieces_;
  std::vector<std::int32_t> spaces_;       // offsets of U+2581 in normalized_
  std::vector<std::int32_t> word_starts_;  // of the text being encoded, and its end
  std::vector<SentencePieceWordCache::Key> word_keys_;
  std::vector<SentencePieceWordCache::Piece> word_pieces_;  // a word's, on their way to the cache
  SentencePieceWordCache cache_;
};

}  // namespace mgt
