// Megatron's TikTokenizer (tokenizer.py CustomTikTokenizer): tiktoken's byte-level BPE over
// mergeable ranks, with --tiktoken-num-special-tokens special ids first (<unk> <s> </s>, the
// --tiktoken-special-tokens, then <SPECIAL_i> fillers) and the ranks after them.
#pragma once
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/available_memory.hpp"
#include "tokenizer/tokenizer.hpp"

namespace mgt {

struct TikTokenOptions {
  std::string path;         // --tokenizer-model: Megatron's JSON ranks, or a .tiktoken file
  std::string pattern;      // --tiktoken-pattern: "v1" or "v2"
  std::optional<std::int64_t> vocab_size;  // --vocab-size (Megatron's fallback: 2^17)
  int num_special_tokens = 1000;            // --tiktoken-num-special-tokens
  std::optional<std::vector<std::string>> special_tokens;  // --tiktoken-special-tokens
};

// The regexes of megatron/training/tokenizer/tokenizer.py.
extern const std::string_view kTikTokenPatternV1;
extern const std::string_view kTikTokenPatternV2;

// The table of --tiktoken-num-special-tokens special tokens is built whole (a "<SPECIAL_i>" filler
// for each id not named): throws mgt::UsageError naming the flag and the estimated size when
// `available` (nullopt: unknown, no check) cannot hold it, rather than an allocation failing
// minutes later. TikTokenizer::load calls it with the host's available memory.
void check_tiktoken_special_token_memory(std::int64_t num_special_tokens, const std::optional<AvailableMemory>& available);

class TikTokenizer : public Tokenizer {
public:
  // Reads the ranks: a .json file is Megatron's list of {"rank", "token_bytes", "token_str"}
  // (reload_mergeable_ranks, the only form Megatron reads); any other file is tiktoken's own
  // "BASE64 RANK" lines. Checks what CustomTikTokenizer asserts. Throws mgt::Error (exit 2 for
  // flag values, 1 for the file).
  static std::unique_ptr<TikTokenizer> load(const TikTokenOptions& options);
  ~TikTokenizer() override;

  using Tokenizer::tokenize;
  // encode_ordinary: special tokens in the text are ordinary text.
  void tokenize(std::string_view text, std::vector<TokenId>& out) override;
  std::string detokenize(std::span<const TokenId> ids) const override;
  std::unique_ptr<Tokenizer> clone() const override;

  std::int64_t vocab_size() const override;
  TokenId eod() const override;  // </s>
  std::optional<TokenId> bos() const;
  std::string class_name() const override { return "CustomTikTokenizer"; }
  std::vector<std::string> tokenizer_paths() const override;
  std::vector<std::pair<std::string, std::string>> tokenizer_options() const override;

  struct Tables;
  class Workspace;

private:
  struct Private {};

public:
  TikTokenizer(Private, std::shared_ptr<const Tables> tables);

private:
  std::shared_ptr<const Tables> tables_;
  std::unique_ptr<Workspace> work_;
};

}  // namespace mgt
