// SentencePiece's text normalizer (normalizer.cc Normalizer::Normalize), for mgt's own encoders:
// the model's precompiled character map (nmt_nfkc and the like: a darts-clone double-array trie
// of byte sequences and the NUL-terminated replacements they map to, longest match first), then
// the whitespace rules (drop leading, trailing and repeated spaces, a dummy-prefix space, spaces
// as U+2581). Models whose normalizer needs more (user-defined symbols, which the library matches
// before the map, or whitespace as a suffix) are refused by `build`, and stay with the library.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/sentencepiece_model_proto.hpp"

namespace mgt {

class SentencePieceNormalizer {
public:
  // Null when the model's normalizer has a setting this one does not reproduce; `why_not` says
  // which. Throws mgt::Error when the precompiled map is malformed.
  static std::shared_ptr<const SentencePieceNormalizer> build(const SentencePieceModelProto& model,
                                                              std::string* why_not = nullptr);

  // Replaces `out` with the normalized text; false (out unspecified) when `text` is not valid
  // UTF-8, which the library replaces character by character itself. `spaces`, where given,
  // receives the offset in `out` of every U+2581 (escaped spaces and any in the text), in order:
  // the word boundaries of the unigram encoder, without another pass over `out`.
  bool normalize(std::string_view text, std::string& out, std::vector<std::int32_t>* spaces = nullptr) const;

private:
  // The longest rule matching a prefix of `text`: its length in bytes (0: none) and replacement.
  std::size_t longest_rule(std::string_view text, std::string_view& replacement) const;

  std::vector<std::uint32_t> trie_;   // darts-clone units
  std::string replacements_;          // NUL-terminated strings the trie's values point into
  bool starts_rule_[256] = {};        // whether some rule begins with this byte
  // ASCII bytes other than the space that no rule maps alone or with a following ASCII byte:
  // before another ASCII byte (or the end) such a byte is its own normalized piece, copied in runs.
  bool copied_whole_[256] = {};
  // The same for the space itself: before an ASCII byte (or the end) it is the escaped space.
  bool plain_space_ = false;
  // Every printable ASCII byte but the space is copied whole: runs are found 16 bytes at a time.
  bool printable_copied_ = false;

  // The length of the run of copied-whole bytes that `text` starts with.
  std::size_t copied_run(std::string_view text) const;
  bool add_dummy_prefix_ = true;
  bool remove_extra_whitespaces_ = true;
  bool escape_whitespaces_ = true;
};

}  // namespace mgt
