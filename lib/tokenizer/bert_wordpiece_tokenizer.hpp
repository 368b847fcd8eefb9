// Megatron's BertWordPieceLowerCase / BertWordPieceCase tokenizers (v0.13
// `_BertWordPieceTokenizer` over the original BERT `FullTokenizer`): basic tokenization (clean
// text, CJK spacing, whitespace split, optional lower-case + accent strip, punctuation split),
// then greedy longest-match-first WordPiece with "##" continuations.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace mgt {

class BertWordPieceTokenizer final : public Tokenizer {
public:
  // Reads a BERT vocab.txt (id = line number, each line stripped of whitespace) and appends
  // [BOS], [EOS] and <extra_id_0..N-1> when absent, as Megatron does. Throws mgt::Error naming
  // the file when it cannot be read or lacks [CLS], [SEP], [PAD] or [MASK].
  static std::unique_ptr<BertWordPieceTokenizer> load(const std::string& vocab_file,
                                                      bool lower_case, int vocab_extra_ids = 0);

  using Tokenizer::tokenize;
  void tokenize(std::string_view text, std::vector<TokenId>& out) override;
  // The WordPiece strings rather than ids ("[UNK]" included); for tests and debugging.
  std::vector<std::string> tokenize_to_strings(std::string_view text);

  // Megatron's decode: tokens joined by spaces, " ##" removed, then its English clean-up of
  // spaces before punctuation and contractions. Throws mgt::Error for an id not in the vocab.
  std::string detokenize(std::span<const TokenId> ids) const override;
  std::unique_ptr<Tokenizer> clone() const override;

  std::int64_t vocab_size() const override;
  TokenId eod() const override { return eos(); }
  std::optional<TokenId> pad() const override;

  TokenId cls() const;
  TokenId sep() const;
  TokenId mask() const;
  TokenId bos() const;
  TokenId eos() const;
  std::optional<TokenId> token_to_id(std::string_view token) const;

  bool lower_case() const;
  std::string class_name() const override { return "_BertWordPieceTokenizer"; }
  std::vector<std::string> tokenizer_paths() const override;
  std::vector<std::pair<std::string, std::string>> tokenizer_options() const override;

  struct Vocab;  // immutable tables shared by clones
  class Impl;    // per-instance scratch buffers

  explicit BertWordPieceTokenizer(std::shared_ptr<const Vocab> vocab);
  ~BertWordPieceTokenizer() override;
  BertWordPieceTokenizer(const BertWordPieceTokenizer&) = delete;
  BertWordPieceTokenizer& operator=(const BertWordPieceTokenizer&) = delete;

private:
  std::shared_ptr<const Vocab> vocab_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mgt
