// What HuggingFaceTokenizer::load makes of tokenizer.json and its configuration files.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/byte_bpe.hpp"
#include "tokenizer/hf_tokenizer.hpp"
#include "tokenizer/split_pretokenizer.hpp"

namespace mgt {

// tokenizers' AddedToken (added_vocabulary.rs).
struct HfAddedToken {
  TokenId id = 0;
  std::string content;
  bool special = false;
  bool normalized = false;  // matched after the normalizer rather than in the raw text
  bool lstrip = false, rstrip = false, single_word = false;
};

// One step of the pre-tokenizer, each applied to every piece the previous steps made.
struct HfPreTokenizerStep {
  enum class Kind {
    kByteLevel,    // optional prefix space, optional GPT-2 regex; bytes stay bytes here
    kSplitLlama,   // Split (Isolated) with a Llama 3-family pattern
    kSplitGpt2,    // Split (Isolated) with GPT-2's pattern
    kSplitIcu,     // Split (Isolated) with any other regex
    kSplitString,  // Split (Isolated) on a literal string
    kDigits,       // Digits: runs of ASCII digits (or each digit) apart
  } kind;
  bool add_prefix_space = false;
  bool use_regex = false;
  bool individual_digits = false;
  LlamaSplitPattern llama;
  std::shared_ptr<const IcuSplitRegex> icu;
  std::string literal;
};

enum class HfNormalization { kNfc, kNfd, kNfkc, kNfkd };

struct HuggingFaceTokenizer::Tables {
  std::string path;             // as given (the directory, or tokenizer.json)
  std::string tokenizer_json;   // the file read

  std::vector<HfNormalization> normalizers;
  std::vector<HfPreTokenizerStep> pre_tokenizer;
  ByteBpeTables bpe;

  // Added tokens, matched leftmost-longest: those with normalized=false in the raw text, then
  // the others in the normalized text.
  std::vector<HfAddedToken> added_raw, added_normalized;

  // What the post-processor adds around the ids of a single sequence.
  std::vector<TokenId> prefix, suffix;

  // Decoding and len(tokenizer): id -> token string (added tokens over the model's), and the
  // token's bytes when it is written in the byte alphabet.
  std::vector<std::optional<std::string>> id_token;
  std::vector<std::uint8_t> id_is_added;
  std::int64_t vocab_size = 0;

  TokenId eos = 0;
  std::optional<TokenId> bos, pad;
};

}  // namespace mgt
