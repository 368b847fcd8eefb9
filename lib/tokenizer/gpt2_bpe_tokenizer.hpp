// Megatron's GPT2BPETokenizer (v0.13 gpt2_tokenization.py): GPT-2's byte-level BPE over the
// pre-tokenizer regex, without special-token parsing.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace mgt {

class Gpt2BpeTokenizer : public Tokenizer {
public:
  // Reads a vocab JSON (token string -> id) and a merges file ("#version" line, then one
  // "A B" merge per line; like Megatron, a last line without a newline is ignored).
  // Throws mgt::Error naming the file at fault.
  static std::unique_ptr<Gpt2BpeTokenizer> load(const std::string& vocab_file,
                                                const std::string& merge_file);

  ~Gpt2BpeTokenizer() override;

  using Tokenizer::tokenize;
  // Never throws on text: bytes that are not valid UTF-8 are pre-tokenized one at a time as
  // punctuation-like characters and encoded through their byte tokens.
  void tokenize(std::string_view text, std::vector<TokenId>& out) override;
  // Throws mgt::Error for an id that is not in the vocabulary (Megatron raises KeyError).
  // Byte sequences that are not valid UTF-8 become U+FFFD, one per maximal invalid subpart,
  // as Python's bytes.decode('utf-8', errors='replace') does.
  std::string detokenize(std::span<const TokenId> ids) const override;
  std::unique_ptr<Tokenizer> clone() const override;

  std::int64_t vocab_size() const override;
  TokenId eod() const override;
  std::string class_name() const override { return "_GPT2BPETokenizer"; }
  std::vector<std::string> tokenizer_paths() const override;

  // The pre-tokenizer alone: the pieces Python's regex.findall would return, as byte ranges of
  // `text`. Exposed for tests and tools.
  static std::vector<std::string_view> pretokenize(std::string_view text);

  struct Tables;     // immutable, shared by clones (gpt2_bpe_tables.hpp)
  class Workspace;   // per-instance cache and scratch buffers (gpt2_bpe_workspace.hpp)

private:
  struct Private {};  // only load() and clone() construct, yet through std::make_unique

public:
  Gpt2BpeTokenizer(Private, std::shared_ptr<const Tables> tables);

private:

  std::shared_ptr<const Tables> tables_;
  std::unique_ptr<Workspace> work_;
};

}  // namespace mgt
