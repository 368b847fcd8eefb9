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
    kMetaspace,    // spaces to `replacement`, which may be prepended; optionally split before it
  } kind;
  bool add_prefix_space = false;
  bool use_regex = false;
  bool individual_digits = false;
  LlamaSplitPattern llama;
  std::shared_ptr<const IcuSplitRegex> icu;
  std::string literal;
  // Metaspace (pre_tokenizers/metaspace.rs): prepend `replacement` always, only to the piece
  // that starts the input ("first"), or never; `split` cuts before every replacement.
  enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
  std::string replacement;
  bool split = false;
};

// One normalizer of the sequence: Unicode normalization forms, or the string edits of Llama 2's
// Prepend("▁") + Replace(" ", "▁").
struct HfNormalizer {
  enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kPrepend, kReplace } kind;
  std::string pattern;  // Replace: the literal replaced everywhere
  std::string content;  // Prepend: the prefix of a non-empty text; Replace: the replacement
};

// One decoder of the sequence, for vocabularies of plain strings (byte-level ones decode through
// GPT-2's byte alphabet): tokenizers' decoders/{replace,byte_fallback,fuse,strip,metaspace}.rs.
struct HfDecoderStep {
  enum class Kind { kReplace, kByteFallback, kFuse, kStrip, kMetaspace } kind;
  std::string pattern, content;   // Replace; Metaspace: content is the replacement
  std::size_t start = 0, stop = 0;  // Strip: characters equal to content cut at each end, at most
  bool strip_first = true;         // Metaspace: prepend_scheme is not "never"
};

struct HuggingFaceTokenizer::Tables {
  std::string path;             // as given (the directory, or tokenizer.json)
  std::string tokenizer_json;   // the file read

  std::vector<HfNormalizer> normalizers;
  std::vector<HfPreTokenizerStep> pre_tokenizer;
  ByteBpeTables bpe;
  // Byte-level vocabularies write tokens in GPT-2's byte alphabet; the others (SentencePiece-
  // derived, Llama 2) write them as plain strings, with <0xHH> tokens for byte fallback.
  bool byte_level = true;
  std::optional<std::vector<HfDecoderStep>> decoder;  // plain-string vocabularies; none: tokens joined by spaces

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
