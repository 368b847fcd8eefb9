// Megatron's HuggingFaceTokenizer (v0.13 tokenizer.py _HuggingFaceTokenizer): what
// transformers.AutoTokenizer.from_pretrained(DIR)(text).input_ids returns for a fast tokenizer
// described by DIR/tokenizer.json, for the BPE family: byte-level (GPT-2, Llama 3, Qwen2, ...) and
// SentencePiece-derived with byte fallback (Llama 2, Mistral: Metaspace, or Prepend + Replace).
#pragma once
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace mgt {

class HuggingFaceTokenizer : public Tokenizer {
public:
  // `path` is a directory holding tokenizer.json (and tokenizer_config.json and/or
  // special_tokens_map.json, which name eos_token, bos_token, pad_token), or a tokenizer.json
  // file, whose directory is searched for those. Throws mgt::Error naming the file and the
  // unsupported feature (a model other than BPE, a normalizer other than Unicode normalization,
  // Prepend or a literal Replace, a Whitespace pre-tokenizer, ...), or when no eos_token is named.
  static std::unique_ptr<HuggingFaceTokenizer> load(const std::string& path);

  ~HuggingFaceTokenizer() override;

  using Tokenizer::tokenize;
  // Added and special tokens are matched in the text first; a post-processor template adds its
  // tokens (Llama 3's <|begin_of_text|>), as add_special_tokens=True does.
  void tokenize(std::string_view text, std::vector<TokenId>& out) override;
  // tokenizer.decode(ids): special tokens kept, bytes that are not UTF-8 replaced by U+FFFD.
  // Throws mgt::Error for an id outside the vocabulary.
  std::string detokenize(std::span<const TokenId> ids) const override;
  std::unique_ptr<Tokenizer> clone() const override;

  std::int64_t vocab_size() const override;  // len(tokenizer): the vocabulary with added tokens
  TokenId eod() const override;               // eos_token_id
  std::optional<TokenId> pad() const override;
  std::optional<TokenId> bos() const;
  std::string class_name() const override { return "_HuggingFaceTokenizer"; }
  std::vector<std::string> tokenizer_paths() const override;

  // The pieces the pre-tokenizer makes of text that holds no added token, as byte strings.
  // Exposed for tests.
  std::vector<std::string> pretokenize(std::string_view text);

  struct Tables;   // immutable, shared by clones (hf_tokenizer_tables.hpp)
  class Workspace;

private:
  struct Private {};

public:
  HuggingFaceTokenizer(Private, std::shared_ptr<const Tables> tables);

private:
  std::shared_ptr<const Tables> tables_;
  std::unique_ptr<Workspace> work_;
};

}  // namespace mgt
