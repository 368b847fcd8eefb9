// The tokenizer interface shared by every program, and the factory that builds one from
// Megatron's tokenizer flags (--tokenizer-type, --vocab-file, --merge-file, --vocab-size, ...).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mgt {

using TokenId = std::int32_t;

struct TokenizerOptions {
  std::string type;                       // Megatron's --tokenizer-type value
  std::string vocab_file;                 // --vocab-file
  std::string merge_file;                 // --merge-file
  std::optional<std::int64_t> vocab_size; // --vocab-size (NullTokenizer)
  int vocab_extra_ids = 0;                // --vocab-extra-ids
  std::string tokenizer_model{};          // --tokenizer-model (SentencePiece, HuggingFace, TikToken)
  std::string tiktoken_pattern{};         // --tiktoken-pattern v1|v2 (TikTokenizer)
  int tiktoken_num_special_tokens = 1000; // --tiktoken-num-special-tokens
  std::optional<std::vector<std::string>> tiktoken_special_tokens{};  // --tiktoken-special-tokens
};

class Tokenizer {
public:
  virtual ~Tokenizer() = default;

  // Appends the ids of `text` to `out`. An instance may keep a cache, so it is not thread-safe:
  // each thread uses its own clone().
  virtual void tokenize(std::string_view text, std::vector<TokenId>& out) = 0;
  std::vector<TokenId> tokenize(std::string_view text) {
    std::vector<TokenId> ids;
    tokenize(text, ids);
    return ids;
  }
  virtual std::string detokenize(std::span<const TokenId> ids) const = 0;

  // A new instance sharing the immutable tables, with its own cache.
  virtual std::unique_ptr<Tokenizer> clone() const = 0;

  virtual std::int64_t vocab_size() const = 0;  // true size, before Megatron's padding
  virtual TokenId eod() const = 0;
  virtual std::optional<TokenId> pad() const { return std::nullopt; }

  // Megatron's class name, e.g. "_GPT2BPETokenizer".
  virtual std::string class_name() const = 0;
  // Megatron's MegatronTokenizer.unique_identifiers: ("class", name), ("tokenizer_path", [...]),
  // then the options as strings, in order. Used in dataset cache descriptions.
  virtual std::vector<std::string> tokenizer_paths() const = 0;
  virtual std::vector<std::pair<std::string, std::string>> tokenizer_options() const { return {}; }
};

// Throws mgt::Error naming the flag or file at fault.
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options);

// The names accepted by make_tokenizer, for --help and error messages.
std::vector<std::string> supported_tokenizer_types();

// Megatron's padded vocabulary: ceil(vocab / (divisible_by * tp)) * divisible_by * tp.
std::int64_t padded_vocab_size(std::int64_t vocab_size, std::int64_t divisible_by,
                               std::int64_t tensor_parallel_size);

}  // namespace mgt
