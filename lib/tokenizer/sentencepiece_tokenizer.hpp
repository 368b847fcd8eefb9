// Megatron's SentencePiece tokenizers (v0.13 tokenizer.py): _SentencePieceTokenizer,
// _GPTSentencePieceTokenizer and _Llama2Tokenizer, over the SentencePiece library, which gives
// the `sentencepiece` Python package's ids for the same .model file.
#pragma once
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace mgt {

class SentencePieceBpeEncoder;
class SentencePieceUnigramEncoder;

class SentencePieceTokenizer : public Tokenizer {
public:
  enum class Kind {
    // SentencePieceTokenizer: the model's pieces, then <CLS> <SEP> <EOD> <MASK>, the pad, bos
    // and eos pieces (or <PAD> <BOS> <EOS>) and <extra_id_i> where missing; those special tokens
    // are matched in the text before encoding; eod = <EOD>.
    kSentencePiece,
    // GPTSentencePieceTokenizer: encode_as_ids; eod = the model's eos.
    kGpt,
    // Llama2Tokenizer: the model's bos, then encode(text); eod = the model's eos.
    kLlama2,
  };

  // Throws mgt::Error naming the file when it is not a SentencePiece model, or when a kind that
  // needs them finds no eos (all kinds but kSentencePiece) or bos (kLlama2) piece.
  // use_own_encoder = false keeps every text with the library (tests compare the two).
  static std::unique_ptr<SentencePieceTokenizer> load(const std::string& model_file, Kind kind,
                                                      int vocab_extra_ids = 0, bool use_own_encoder = true);
  ~SentencePieceTokenizer() override;

  using Tokenizer::tokenize;
  void tokenize(std::string_view text, std::vector<TokenId>& out) override;
  // Megatron's detokenize: decode_ids, with kSentencePiece's special tokens written " TOKEN ".
  std::string detokenize(std::span<const TokenId> ids) const override;
  std::unique_ptr<Tokenizer> clone() const override;
  // Whether texts go through mgt's SentencePieceBpeEncoder or SentencePieceUnigramEncoder (ids
  // equal to the library's) rather than the library; why_not receives the model setting that
  // keeps them with the library.
  bool uses_own_encoder(std::string* why_not = nullptr) const;

  std::int64_t vocab_size() const override;
  TokenId eod() const override;
  std::optional<TokenId> pad() const override;
  std::optional<TokenId> bos() const;
  std::string class_name() const override;
  std::vector<std::string> tokenizer_paths() const override;
  std::vector<std::pair<std::string, std::string>> tokenizer_options() const override;

  struct Tables;

private:
  struct Private {};

public:
  SentencePieceTokenizer(Private, std::shared_ptr<const Tables> tables);

private:
  std::shared_ptr<const Tables> tables_;
  std::unique_ptr<SentencePieceBpeEncoder> bpe_;  // per instance: it holds a word cache
  std::unique_ptr<SentencePieceUnigramEncoder> unigram_;  // per instance: working memory
};

}  // namespace mgt
