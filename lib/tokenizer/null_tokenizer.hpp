// Megatron v0.13's NullTokenizer (`_NullTokenizer`): the text already is a list of ids
// separated by single spaces. eod is V and the vocabulary V + 1 for --vocab-size V (HEAD
// differs: there eod = V - 1 and the vocabulary is V).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace mgt {

class NullTokenizer final : public Tokenizer {
public:
  // Throws mgt::UsageError unless 0 <= vocab_size < 2^31 - 1 (eod must fit a TokenId).
  explicit NullTokenizer(std::int64_t vocab_size);

  using Tokenizer::tokenize;
  // Python's [int(x) for x in text.split(' ')]: every piece between single spaces must be an
  // integer literal as int() accepts it (surrounding whitespace, sign, '_' between digits,
  // Unicode decimal digits). An empty text or a doubled space is an error, as in Megatron; an id
  // outside [0, V] too, which Megatron would store. Throws mgt::Error naming the bad piece.
  void tokenize(std::string_view text, std::vector<TokenId>& out) override;
  std::string detokenize(std::span<const TokenId> ids) const override;
  std::unique_ptr<Tokenizer> clone() const override;

  std::int64_t vocab_size() const override { return vocab_size_ + 1; }
  TokenId eod() const override { return static_cast<TokenId>(vocab_size_); }

  std::string class_name() const override { return "_NullTokenizer"; }
  // Megatron passes a single None path (JSON [null]); an empty list is the closest we can say.
  std::vector<std::string> tokenizer_paths() const override { return {}; }
  std::vector<std::pair<std::string, std::string>> tokenizer_options() const override;

private:
  // One piece's id, checked against the vocabulary.
  TokenId token(std::string_view piece) const;

  std::int64_t vocab_size_;
};

}  // namespace mgt
